"""Vulkan runtimes for the kernel tests; every test here skips, saying why, without Vulkan."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ds4.adapters.compute.vulkan.device import open_device
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime, runtime, unavailable_reason


@pytest.fixture(scope="session")
def vk() -> VulkanRuntime:
    """The process runtime (subgroup reductions where the device has them)."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    return runtime()


@pytest.fixture(scope="session")
def vk_shared_memory(vk: VulkanRuntime) -> Iterator[VulkanRuntime]:
    """A second runtime forced onto the shared-memory reduction variants."""
    rt = VulkanRuntime(open_device(), subgroups=False)
    yield rt
    rt.close()


@pytest.fixture(scope="session", params=["subgroup", "shared"])
def vk_any(request: pytest.FixtureRequest, vk: VulkanRuntime) -> VulkanRuntime:
    """Both reduction variants (subgroup falls back to shared where the device lacks it)."""
    if request.param == "subgroup":
        return vk
    shared: VulkanRuntime = request.getfixturevalue("vk_shared_memory")
    return shared
