"""Only here because setuptools reads `cffi_modules` from setup() alone.

The package build compiles every cffi extension builder in native/build/*_build.py;
nothing is compiled lazily at import time. All other metadata is in pyproject.toml.
"""

from pathlib import Path

from setuptools import setup

setup(
    cffi_modules=[
        f"{path.as_posix()}:ffibuilder" for path in sorted(Path("native/build").glob("*_build.py"))
    ],
)
