"""Only here because setuptools reads `cffi_modules` from setup() alone.

The package build compiles every cffi extension builder in native/build/*_build.py;
nothing is compiled lazily at import time. All other metadata is in pyproject.toml
(MANIFEST.in says what the sdist carries besides the package: the native sources).
"""

from pathlib import Path

from setuptools import setup

setup(
    cffi_modules=[
        f"{path.as_posix()}:ffibuilder" for path in sorted(Path("native/build").glob("*_build.py"))
    ],
    # cffi compiles against CPython's limited API (the modules are *.abi3.so), so one
    # wheel serves every CPython >= 3.11: tag it so (docs/adr/0056-library-and-wheel.md).
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
