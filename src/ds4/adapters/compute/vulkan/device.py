"""Instance, physical device and compute queue selection (docs/vulkan.md#devices).

The first discrete GPU wins, then an integrated one, then anything with a compute queue
(lavapipe reports itself as a CPU device). DS4_VULKAN_DEVICE=N picks the N-th device as
the loader enumerates them (`vulkaninfo --summary` lists them in the same order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ds4.adapters.compute.vulkan import vk_api as vk
from ds4.adapters.compute.vulkan.vk_api import VulkanUnavailableError, check, ffi

_TYPE_RANK = {2: 0, 1: 1, 3: 2, 4: 3, 0: 4}  # discrete, integrated, virtual, CPU, other


@dataclass
class VulkanDevice:
    """An opened logical device with one compute queue; close() releases it."""

    lib: Any
    instance: Any
    physical: Any
    device: Any
    queue: Any
    queue_family: int
    name: str
    kind: str
    api_version: str
    subgroup_size: int
    subgroup_arithmetic: bool
    max_storage_range: int
    memory: Any  # VkPhysicalDeviceMemoryProperties

    def close(self) -> None:
        if self.device is not None:
            self.lib.vkDeviceWaitIdle(self.device)
            self.lib.vkDestroyDevice(self.device, ffi.NULL)
            self.device = None
        if self.instance is not None:
            self.lib.vkDestroyInstance(self.instance, ffi.NULL)
            self.instance = None

    def describe(self) -> str:
        sub = f"subgroup {self.subgroup_size}" + (
            " with arithmetic" if self.subgroup_arithmetic else " (shared-memory reductions)"
        )
        return f"{self.name} ({self.kind}, Vulkan {self.api_version}, {sub})"


def open_device(index: int | None = None) -> VulkanDevice:
    """Open the chosen device; VulkanUnavailableError (with the reason) when there is none."""
    lib = vk.lib()
    instance = _create_instance(lib)
    try:
        physical = _pick_physical(lib, instance, index)
        return _open_logical(lib, instance, physical)
    except BaseException:
        lib.vkDestroyInstance(instance, ffi.NULL)
        raise


def _create_instance(lib: Any) -> Any:
    keep = [ffi.new("char[]", b"ds4"), ffi.new("char[]", b"ds4")]
    app = ffi.new("VkApplicationInfo *", {
        "sType": vk.ST_APPLICATION_INFO, "pApplicationName": keep[0], "pEngineName": keep[1],
        "apiVersion": vk.API_VERSION_1_1,
    })  # fmt: skip
    info = ffi.new("VkInstanceCreateInfo *", {
        "sType": vk.ST_INSTANCE_CREATE_INFO, "pApplicationInfo": app,
    })  # fmt: skip
    out = ffi.new("VkInstance *")
    result = lib.vkCreateInstance(info, ffi.NULL, out)
    if result != vk.SUCCESS:
        raise VulkanUnavailableError(
            f"Vulkan unavailable: vkCreateInstance returned {result} (no driver installed? "
            "install mesa-vulkan-drivers or the GPU vendor's Vulkan driver)"
        )
    return out[0]


def _pick_physical(lib: Any, instance: Any, index: int | None) -> Any:
    count = ffi.new("uint32_t *")
    check(lib.vkEnumeratePhysicalDevices(instance, count, ffi.NULL), "vkEnumeratePhysicalDevices")
    if count[0] == 0:
        raise VulkanUnavailableError("Vulkan unavailable: the loader found no device")
    devices = ffi.new("VkPhysicalDevice[]", count[0])
    check(lib.vkEnumeratePhysicalDevices(instance, count, devices), "vkEnumeratePhysicalDevices")
    if index is not None:
        if not 0 <= index < count[0]:
            raise VulkanUnavailableError(
                f"Vulkan device index {index} out of range: {count[0]} device(s) present"
            )
        return devices[index]
    props = ffi.new("VkPhysicalDeviceProperties *")
    ranked = []
    for i in range(count[0]):
        lib.vkGetPhysicalDeviceProperties(devices[i], props)
        if _compute_family(lib, devices[i]) is not None:
            ranked.append((_TYPE_RANK.get(props.deviceType, 5), i))
    if not ranked:
        raise VulkanUnavailableError("Vulkan unavailable: no device has a compute queue")
    return devices[min(ranked)[1]]


def _compute_family(lib: Any, physical: Any) -> int | None:
    """A compute-only family if there is one (async compute engines), else any with compute."""
    count = ffi.new("uint32_t *")
    lib.vkGetPhysicalDeviceQueueFamilyProperties(physical, count, ffi.NULL)
    fams = ffi.new("VkQueueFamilyProperties[]", count[0])
    lib.vkGetPhysicalDeviceQueueFamilyProperties(physical, count, fams)
    compute = [i for i in range(count[0]) if fams[i].queueFlags & vk.QUEUE_COMPUTE_BIT]
    only = [i for i in compute if not fams[i].queueFlags & vk.QUEUE_GRAPHICS_BIT]
    chosen = only or compute
    return chosen[0] if chosen else None


def _open_logical(lib: Any, instance: Any, physical: Any) -> VulkanDevice:
    family = _compute_family(lib, physical)
    if family is None:
        raise VulkanUnavailableError("Vulkan unavailable: the chosen device has no compute queue")
    sub = ffi.new("VkPhysicalDeviceSubgroupProperties *", {
        "sType": vk.ST_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
    })  # fmt: skip
    props2 = ffi.new("VkPhysicalDeviceProperties2 *", {
        "sType": vk.ST_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": sub,
    })  # fmt: skip
    lib.vkGetPhysicalDeviceProperties2(physical, props2)
    props = props2.properties
    priority = ffi.new("float[1]", [1.0])
    queue_info = ffi.new("VkDeviceQueueCreateInfo *", {
        "sType": vk.ST_DEVICE_QUEUE_CREATE_INFO, "queueFamilyIndex": family, "queueCount": 1,
        "pQueuePriorities": priority,
    })  # fmt: skip
    info = ffi.new("VkDeviceCreateInfo *", {
        "sType": vk.ST_DEVICE_CREATE_INFO, "queueCreateInfoCount": 1,
        "pQueueCreateInfos": queue_info,
    })  # fmt: skip
    out = ffi.new("VkDevice *")
    check(lib.vkCreateDevice(physical, info, ffi.NULL, out), "vkCreateDevice")
    queue = ffi.new("VkQueue *")
    lib.vkGetDeviceQueue(out[0], family, 0, queue)
    memory = ffi.new("VkPhysicalDeviceMemoryProperties *")
    lib.vkGetPhysicalDeviceMemoryProperties(physical, memory)
    compute_ops = sub.supportedStages & vk.SHADER_STAGE_COMPUTE
    needed = vk.SUBGROUP_FEATURE_BASIC | vk.SUBGROUP_FEATURE_ARITHMETIC
    v = props.apiVersion
    return VulkanDevice(
        lib=lib, instance=instance, physical=physical, device=out[0], queue=queue[0],
        queue_family=family, name=ffi.string(props.deviceName).decode("utf-8", "replace"),
        kind=vk.DEVICE_TYPE_NAMES.get(props.deviceType, "other"),
        api_version=f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}",
        subgroup_size=int(sub.subgroupSize),
        subgroup_arithmetic=bool(compute_ops) and (sub.supportedOperations & needed) == needed,
        max_storage_range=int(props.limits.maxStorageBufferRange), memory=memory,
    )  # fmt: skip
