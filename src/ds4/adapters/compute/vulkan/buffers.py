"""Storage buffers: device-local ones (weights, filled through staging) and host-visible
mapped ones (activations, staging, read-back)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan import vk_api as vk
from ds4.adapters.compute.vulkan.device import VulkanDevice
from ds4.adapters.compute.vulkan.vk_api import check, ffi
from ds4.domain.errors import Ds4Error

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
