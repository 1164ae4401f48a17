"""Only here because setuptools reads `cffi_modules` from setup() alone.

The package build compiles every cffi extension builder in native/build/*_build.py;
nothing is compiled lazily at import time. It also compiles the Vulkan compute shaders
(native/vulkan/*.comp) to SPIR-V with glslc into ds4/_vulkan_spirv/
(docs/adr/0058-vulkan-compute-backend.md). All other metadata is in pyproject.toml
(MANIFEST.in says what the sdist carries besides the package: the native sources).
"""

import runpy
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

_compile_shaders = runpy.run_path(str(Path(__file__).parent / "native/build/vulkan_shaders.py"))[
    "compile_shaders"
]


class BuildExtWithShaders(build_ext):
    def run(self) -> None:
        super().run()
        targets = [Path(self.build_lib) / "ds4" / "_vulkan_spirv"]
        if self.inplace or getattr(self, "editable_mode", False):
            targets.append(Path(__file__).parent / "src" / "ds4" / "_vulkan_spirv")
        for target in targets:
            why_not = _compile_shaders(target)
            if why_not:
                print(f"warning: Vulkan shaders not built ({why_not}); Vulkan unavailable")


setup(
    cffi_modules=[
        f"{path.as_posix()}:ffibuilder" for path in sorted(Path("native/build").glob("*_build.py"))
    ],
    cmdclass={"build_ext": BuildExtWithShaders},
    # cffi compiles against CPython's limited API (the modules are *.abi3.so), so one
    # wheel serves every CPython >= 3.11: tag it so (docs/adr/0056-library-and-wheel.md).
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
