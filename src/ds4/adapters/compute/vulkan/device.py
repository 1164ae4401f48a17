"""The Vulkan device: instance, physical device and compute queue selection, storage
buffers, the compiled shaders and the compute pipelines built from them
(docs/vulkan.md#devices).

The first discrete GPU wins, then an integrated one, then anything with a compute queue
(lavapipe reports itself as a CPU device). DS4_VULKAN_DEVICE=N picks the N-th device as
the loader enumerates them (`vulkaninfo --summary` lists them in the same order).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan import vk_api as vk
from ds4.adapters.compute.vulkan.vk_api import VulkanUnavailableError, check, ffi
from ds4.domain.errors import Ds4Error

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


# -----------------------------------------------------------------------------
# Storage buffers: device-local ones (weights, filled through staging) and host-visible
# mapped ones (activations, staging, read-back).

_USAGE = vk.BUFFER_USAGE_STORAGE | vk.BUFFER_USAGE_TRANSFER_SRC | vk.BUFFER_USAGE_TRANSFER_DST


@dataclass
class Buffer:
    """One VkBuffer with its own memory; `mapped` is the host pointer for host-visible ones."""

    dev: VulkanDevice
    handle: int
    memory: int
    size: int
    mapped: Any  # void * or None

    @property
    def host_visible(self) -> bool:
        return self.mapped is not None

    def write(self, data: npt.NDArray[Any], offset: int = 0) -> None:
        """Copy a contiguous array's bytes into a host-visible buffer at `offset`."""
        raw = np.ascontiguousarray(data)
        if self.mapped is None or offset + raw.nbytes > self.size:
            raise Ds4Error(f"cannot write {raw.nbytes} bytes at {offset} into this buffer")
        ffi.memmove(ffi.cast("char *", self.mapped) + offset, ffi.from_buffer(raw), raw.nbytes)

    def read(self, dtype: npt.DTypeLike, count: int, offset: int = 0) -> npt.NDArray[Any]:
        """A copy of `count` values of `dtype` from a host-visible buffer."""
        out = np.empty(count, dtype=dtype)
        if self.mapped is None or offset + out.nbytes > self.size:
            raise Ds4Error(f"cannot read {out.nbytes} bytes at {offset} from this buffer")
        ffi.memmove(ffi.from_buffer(out), ffi.cast("char *", self.mapped) + offset, out.nbytes)
        return out

    def release(self) -> None:
        lib, device = self.dev.lib, self.dev.device
        if self.handle and device is not None:
            if self.mapped is not None:
                lib.vkUnmapMemory(device, self.memory)
                self.mapped = None
            lib.vkDestroyBuffer(device, self.handle, ffi.NULL)
            lib.vkFreeMemory(device, self.memory, ffi.NULL)
            self.handle = 0


def create_buffer(dev: VulkanDevice, size: int, *, host_visible: bool) -> Buffer:
    """A storage buffer of `size` bytes (rounded up to 4), device-local or host-visible."""
    if size <= 0:
        raise Ds4Error(f"buffer size must be positive, got {size}")
    size = -(-size // 4) * 4
    lib = dev.lib
    info = ffi.new("VkBufferCreateInfo *", {
        "sType": vk.ST_BUFFER_CREATE_INFO, "size": size, "usage": _USAGE, "sharingMode": 0,
    })  # fmt: skip
    handle = ffi.new("VkBuffer *")
    check(lib.vkCreateBuffer(dev.device, info, ffi.NULL, handle), "vkCreateBuffer")
    req = ffi.new("VkMemoryRequirements *")
    lib.vkGetBufferMemoryRequirements(dev.device, handle[0], req)
    if host_visible:
        kind = _memory_type(dev, req.memoryTypeBits,
                            vk.MEMORY_HOST_VISIBLE | vk.MEMORY_HOST_COHERENT, 0)  # fmt: skip
    else:
        kind = _memory_type(dev, req.memoryTypeBits, vk.MEMORY_DEVICE_LOCAL, 0)
    alloc = ffi.new("VkMemoryAllocateInfo *", {
        "sType": vk.ST_MEMORY_ALLOCATE_INFO, "allocationSize": req.size, "memoryTypeIndex": kind,
    })  # fmt: skip
    memory = ffi.new("VkDeviceMemory *")
    result = lib.vkAllocateMemory(dev.device, alloc, ffi.NULL, memory)
    if result != vk.SUCCESS:
        lib.vkDestroyBuffer(dev.device, handle[0], ffi.NULL)
        check(result, f"vkAllocateMemory of {size} bytes")
    check(lib.vkBindBufferMemory(dev.device, handle[0], memory[0], 0), "vkBindBufferMemory")
    mapped = None
    if host_visible:
        ptr = ffi.new("void **")
        check(lib.vkMapMemory(dev.device, memory[0], 0, size, 0, ptr), "vkMapMemory")
        mapped = ptr[0]
    return Buffer(dev, int(handle[0]), int(memory[0]), size, mapped)


def _memory_type(dev: VulkanDevice, allowed: int, required: int, avoid: int) -> int:
    mem = dev.memory
    for i in range(mem.memoryTypeCount):
        flags = mem.memoryTypes[i].propertyFlags
        if allowed & (1 << i) and flags & required == required and not flags & avoid:
            return i
    raise Ds4Error(f"Vulkan: no memory type with flags {required:#x} on {dev.name}")


# -----------------------------------------------------------------------------
# Where the build put the SPIR-V (native/vulkan/*.comp compiled by glslc) and loading it.
#
# Each shader is compiled twice: NAME.sg.spv reduces with subgroup arithmetic, NAME.spv
# with shared memory only, for devices without subgroup arithmetic in compute.

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


# -----------------------------------------------------------------------------
# Compute pipelines, created once per shader and kept for the device's lifetime.
#
# Every kernel binds only storage buffers (set 0, bindings 0..n-1) and takes at most
# PUSH_BYTES of push constants, so one layout shape serves them all.

PUSH_BYTES = 128  # the minimum every Vulkan device guarantees


@dataclass(frozen=True)
class ComputePipeline:
    name: str
    n_buffers: int
    set_layout: int
    layout: int
    pipeline: int
    module: int


class PipelineCache:
    """name -> ComputePipeline, built on first use from NAME.sg.spv or NAME.spv."""

    def __init__(self, dev: VulkanDevice, *, subgroups: bool) -> None:
        self._dev = dev
        self._subgroups = subgroups
        self._pipelines: dict[str, ComputePipeline] = {}

    def get(self, name: str, n_buffers: int) -> ComputePipeline:
        have = self._pipelines.get(name)
        if have is None:
            have = self._pipelines[name] = self._build(name, n_buffers)
        return have

    def close(self) -> None:
        lib, device = self._dev.lib, self._dev.device
        for p in self._pipelines.values():
            lib.vkDestroyPipeline(device, p.pipeline, ffi.NULL)
            lib.vkDestroyPipelineLayout(device, p.layout, ffi.NULL)
            lib.vkDestroyDescriptorSetLayout(device, p.set_layout, ffi.NULL)
            lib.vkDestroyShaderModule(device, p.module, ffi.NULL)
        self._pipelines.clear()

    def _build(self, name: str, n_buffers: int) -> ComputePipeline:
        lib, device = self._dev.lib, self._dev.device
        code = load_spirv(name, subgroups=self._subgroups)
        words = ffi.new("uint32_t[]", len(code) // 4)
        ffi.memmove(words, code, len(code))
        module = ffi.new("VkShaderModule *")
        info = ffi.new("VkShaderModuleCreateInfo *", {
            "sType": vk.ST_SHADER_MODULE_CREATE_INFO, "codeSize": len(code), "pCode": words,
        })  # fmt: skip
        check(lib.vkCreateShaderModule(device, info, ffi.NULL, module), f"shader {name}")
        bindings = ffi.new("VkDescriptorSetLayoutBinding[]", [
            {"binding": i, "descriptorType": vk.DESCRIPTOR_TYPE_STORAGE_BUFFER,
             "descriptorCount": 1, "stageFlags": vk.SHADER_STAGE_COMPUTE}
            for i in range(n_buffers)
        ])  # fmt: skip
        set_info = ffi.new("VkDescriptorSetLayoutCreateInfo *", {
            "sType": vk.ST_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, "bindingCount": n_buffers,
            "pBindings": bindings,
        })  # fmt: skip
        set_layout = ffi.new("VkDescriptorSetLayout *")
        check(lib.vkCreateDescriptorSetLayout(device, set_info, ffi.NULL, set_layout),
              "vkCreateDescriptorSetLayout")  # fmt: skip
        push = ffi.new("VkPushConstantRange *", {
            "stageFlags": vk.SHADER_STAGE_COMPUTE, "offset": 0, "size": PUSH_BYTES,
        })  # fmt: skip
        layout_info = ffi.new("VkPipelineLayoutCreateInfo *", {
            "sType": vk.ST_PIPELINE_LAYOUT_CREATE_INFO, "setLayoutCount": 1,
            "pSetLayouts": set_layout, "pushConstantRangeCount": 1, "pPushConstantRanges": push,
        })  # fmt: skip
        layout = ffi.new("VkPipelineLayout *")
        check(lib.vkCreatePipelineLayout(device, layout_info, ffi.NULL, layout),
              "vkCreatePipelineLayout")  # fmt: skip
        entry = ffi.new("char[]", b"main")
        pipe_info = ffi.new("VkComputePipelineCreateInfo *", {
            "sType": vk.ST_COMPUTE_PIPELINE_CREATE_INFO,
            "stage": {"sType": vk.ST_PIPELINE_SHADER_STAGE_CREATE_INFO,
                      "stage": vk.SHADER_STAGE_COMPUTE, "module": module[0], "pName": entry},
            "layout": layout[0], "basePipelineIndex": -1,
        })  # fmt: skip
        pipeline = ffi.new("VkPipeline *")
        check(lib.vkCreateComputePipelines(device, 0, 1, pipe_info, ffi.NULL, pipeline),
              f"pipeline {name}")  # fmt: skip
        return ComputePipeline(name, n_buffers, int(set_layout[0]), int(layout[0]),
                               int(pipeline[0]), int(module[0]))  # fmt: skip
