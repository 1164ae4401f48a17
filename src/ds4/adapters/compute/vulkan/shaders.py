"""Where the build put the SPIR-V (native/vulkan/*.comp compiled by glslc) and loading it.

Each shader is compiled twice: NAME.sg.spv reduces with subgroup arithmetic, NAME.spv
with shared memory only, for devices without subgroup arithmetic in compute.
"""

from __future__ import annotations

from pathlib import Path

from ds4.adapters.compute.vulkan.vk_api import VulkanUnavailableError

SPIRV_DIR = Path(__file__).resolve().parents[3] / "_vulkan_spirv"
STAMP = "BUILT"  # written last by the build: the set is complete


def spirv_dir() -> Path:
    """The directory of compiled shaders, or VulkanUnavailableError saying how to get them."""
    if not (SPIRV_DIR / STAMP).exists():
        missing = SPIRV_DIR / "MISSING"
        reason = "the package build has not compiled them"
        if missing.exists():
            reason = missing.read_text(encoding="utf-8").strip()
        raise VulkanUnavailableError(
            f"Vulkan unavailable: no compiled SPIR-V shaders in {SPIRV_DIR} ({reason}); "
            "install glslc and rebuild (make build, or setup.py build_ext --inplace)"
        )
    return SPIRV_DIR


def load_spirv(name: str, *, subgroups: bool) -> bytes:
    path = spirv_dir() / (f"{name}.sg.spv" if subgroups else f"{name}.spv")
    if not path.exists():
        raise VulkanUnavailableError(f"Vulkan unavailable: shader {path.name} was not built")
    code = path.read_bytes()
    if len(code) % 4 or code[:4] != b"\x03\x02\x23\x07":
        raise VulkanUnavailableError(f"Vulkan unavailable: {path} is not SPIR-V")
    return code
