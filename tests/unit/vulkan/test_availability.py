"""Without shaders, a loader or glslc the backend says so, naming the cure; never a traceback."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from ds4.adapters.compute.vulkan import device
from ds4.adapters.compute.vulkan.vk_api import VulkanUnavailableError

ROOT = Path(__file__).resolve().parents[3]


def test_missing_spirv_names_glslc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device, "SPIRV_DIR", tmp_path)
    (tmp_path / "MISSING").write_text("glslc was not found when the package was built\n")
    with pytest.raises(VulkanUnavailableError, match=r"glslc was not found.*install glslc"):
        device.spirv_dir()


def test_a_file_that_is_not_spirv_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(device, "SPIRV_DIR", tmp_path)
    (tmp_path / "BUILT").write_text("ok\n")
    (tmp_path / "matvec_f32.spv").write_bytes(b"not spir-v")
    with pytest.raises(VulkanUnavailableError, match="is not SPIR-V"):
        device.load_spirv("matvec_f32", subgroups=False)
    with pytest.raises(VulkanUnavailableError, match="was not built"):
        device.load_spirv("matvec_f32", subgroups=True)


def test_build_without_glslc_leaves_a_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compile_shaders = runpy.run_path(str(ROOT / "native/build/vulkan_shaders.py"))[
        "compile_shaders"
    ]
    monkeypatch.delenv("GLSLC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert compile_shaders(tmp_path / "out") == "glslc was not found when the package was built"
    assert not (tmp_path / "out" / "BUILT").exists()
    assert "glslc" in (tmp_path / "out" / "MISSING").read_text()


def test_every_shader_source_is_built() -> None:
    """The build compiled both variants of every native/vulkan/*.comp (where glslc exists)."""
    try:
        out = device.spirv_dir()
    except VulkanUnavailableError as exc:
        pytest.skip(str(exc))
    for source in (ROOT / "native/vulkan").glob("*.comp"):
        for suffix in (".spv", ".sg.spv"):
            assert (out / (source.stem + suffix)).read_bytes()[:4] == b"\x03\x02\x23\x07"


def test_a_bad_device_choice_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from ds4.adapters.compute.vulkan import runtime

    monkeypatch.setenv(runtime.DEVICE_ENV, "gpu0")
    with pytest.raises(VulkanUnavailableError, match="DS4_VULKAN_DEVICE='gpu0' is not a device"):
        runtime._device_index()
    monkeypatch.setenv(runtime.DEVICE_ENV, "3")
    assert runtime._device_index() == 3


def test_a_device_index_past_the_last_is_refused() -> None:
    from ds4.adapters.compute.vulkan.device import open_device
    from ds4.adapters.compute.vulkan.runtime import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    with pytest.raises(VulkanUnavailableError, match="index 99 out of range"):
        open_device(99)
