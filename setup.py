"""Only here because setuptools reads `cffi_modules` from setup() alone.

The package build compiles every cffi extension listed below (native/build/*.py);
nothing is compiled lazily at import time. All other metadata is in pyproject.toml.
"""

from setuptools import setup

setup(
    cffi_modules=[
        "native/build/quant_build.py:ffibuilder",
    ],
)
