"""Submissions and the runtime: one command buffer per submission (record dispatches and
copies, submit, wait on a fence), and the process's one device with its pipelines, its
submitter, scratch buffers and uploads.

Descriptor sets come from a pool that is reset after each submission completes, so a
submission may hold up to MAX_SETS dispatches. The runtime is opened on first use and
kept (creating a device costs tens of milliseconds to seconds); `runtime()` raises
VulkanUnavailableError, with the reason, where Vulkan cannot run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan import vk_api as vk
from ds4.adapters.compute.vulkan.device import (
    PUSH_BYTES,
    Buffer,
    PipelineCache,
    VulkanDevice,
    create_buffer,
    open_device,
    spirv_dir,
)
from ds4.adapters.compute.vulkan.vk_api import VulkanUnavailableError, check, ffi
from ds4.domain.errors import Ds4Error

MAX_SETS = 16384  # a Flash step (43 layers, ~75 dispatches each) fits in one
MAX_BUFFERS_PER_SET = 8
MAX_GROUPS = 65535  # the per-dimension dispatch size every device supports


class Recorder:
    """What a kernel records into the open command buffer."""

    def __init__(self, dev: VulkanDevice, pipelines: PipelineCache, cmd: Any, pool: int) -> None:
        self._dev, self._pipelines, self._cmd, self._pool = dev, pipelines, cmd, pool
        self._sets = 0

    def dispatch(
        self, shader: str, buffers: Sequence[Buffer], push: bytes, groups: tuple[int, int, int]
    ) -> None:
        """Run `shader` over `groups` workgroups with these buffers at bindings 0..n-1."""
        if len(push) > PUSH_BYTES or len(buffers) > MAX_BUFFERS_PER_SET:
            raise Ds4Error(f"{shader}: {len(push)} push bytes, {len(buffers)} buffers")
        if any(g < 1 or g > MAX_GROUPS for g in groups):
            raise Ds4Error(f"{shader}: dispatch {groups} outside 1..{MAX_GROUPS} per dimension")
        if self._sets >= MAX_SETS:
            raise Ds4Error(f"more than {MAX_SETS} dispatches in one submission")
        self._sets += 1
        lib, device = self._dev.lib, self._dev.device
        pipe = self._pipelines.get(shader, len(buffers))
        layouts = ffi.new("VkDescriptorSetLayout[1]", [pipe.set_layout])
        alloc = ffi.new("VkDescriptorSetAllocateInfo *", {
            "sType": vk.ST_DESCRIPTOR_SET_ALLOCATE_INFO, "descriptorPool": self._pool,
            "descriptorSetCount": 1, "pSetLayouts": layouts,
        })  # fmt: skip
        dset = ffi.new("VkDescriptorSet *")
        check(lib.vkAllocateDescriptorSets(device, alloc, dset), "vkAllocateDescriptorSets")
        infos = ffi.new("VkDescriptorBufferInfo[]", [
            {"buffer": b.handle, "offset": 0, "range": vk.WHOLE_SIZE} for b in buffers
        ])  # fmt: skip
        writes = ffi.new("VkWriteDescriptorSet[]", [
            {"sType": vk.ST_WRITE_DESCRIPTOR_SET, "dstSet": dset[0], "dstBinding": i,
             "descriptorCount": 1, "descriptorType": vk.DESCRIPTOR_TYPE_STORAGE_BUFFER,
             "pBufferInfo": infos + i}
            for i in range(len(buffers))
        ])  # fmt: skip
        lib.vkUpdateDescriptorSets(device, len(buffers), writes, 0, ffi.NULL)
        lib.vkCmdBindPipeline(self._cmd, vk.PIPELINE_BIND_POINT_COMPUTE, pipe.pipeline)
        lib.vkCmdBindDescriptorSets(self._cmd, vk.PIPELINE_BIND_POINT_COMPUTE, pipe.layout, 0, 1,
                                    dset, 0, ffi.NULL)  # fmt: skip
        if push:
            data = ffi.new("char[]", push)
            lib.vkCmdPushConstants(self._cmd, pipe.layout, vk.SHADER_STAGE_COMPUTE, 0,
                                   len(push), data)  # fmt: skip
        lib.vkCmdDispatch(self._cmd, *groups)

    def copy(self, src: Buffer, dst: Buffer, size: int, src_offset: int = 0,
             dst_offset: int = 0) -> None:  # fmt: skip
        region = ffi.new("VkBufferCopy *", {
            "srcOffset": src_offset, "dstOffset": dst_offset, "size": size,
        })  # fmt: skip
        self._dev.lib.vkCmdCopyBuffer(self._cmd, src.handle, dst.handle, 1, region)

    def barrier(self) -> None:
        """Everything recorded so far (shader or transfer writes) is visible to what follows."""
        every = vk.PIPELINE_STAGE_COMPUTE_SHADER | vk.PIPELINE_STAGE_TRANSFER
        mem = ffi.new("VkMemoryBarrier *", {
            "sType": vk.ST_MEMORY_BARRIER,
            "srcAccessMask": vk.ACCESS_SHADER_WRITE | vk.ACCESS_TRANSFER_WRITE,
            "dstAccessMask": vk.ACCESS_SHADER_READ | vk.ACCESS_SHADER_WRITE
            | vk.ACCESS_TRANSFER_READ | vk.ACCESS_TRANSFER_WRITE,
        })  # fmt: skip
        self._dev.lib.vkCmdPipelineBarrier(self._cmd, every, every, 0, 1, mem, 0, ffi.NULL, 0,
                                           ffi.NULL)  # fmt: skip

    def host_barrier(self) -> None:
        """Device writes so far become visible to host reads after the fence."""
        mem = ffi.new("VkMemoryBarrier *", {
            "sType": vk.ST_MEMORY_BARRIER,
            "srcAccessMask": vk.ACCESS_SHADER_WRITE | vk.ACCESS_TRANSFER_WRITE,
            "dstAccessMask": vk.ACCESS_HOST_READ,
        })  # fmt: skip
        src = vk.PIPELINE_STAGE_COMPUTE_SHADER | vk.PIPELINE_STAGE_TRANSFER
        self._dev.lib.vkCmdPipelineBarrier(self._cmd, src, vk.PIPELINE_STAGE_HOST, 0, 1, mem, 0,
                                           ffi.NULL, 0, ffi.NULL)  # fmt: skip


class Submitter:
    """Owns the command pool, one reusable command buffer, the descriptor pool and a fence."""

    def __init__(self, dev: VulkanDevice, pipelines: PipelineCache) -> None:
        self._dev, self._pipelines = dev, pipelines
        lib, device = dev.lib, dev.device
        pool_info = ffi.new("VkCommandPoolCreateInfo *", {
            "sType": vk.ST_COMMAND_POOL_CREATE_INFO, "flags": vk.COMMAND_POOL_RESET_COMMAND_BUFFER,
            "queueFamilyIndex": dev.queue_family,
        })  # fmt: skip
        pool = ffi.new("VkCommandPool *")
        check(lib.vkCreateCommandPool(device, pool_info, ffi.NULL, pool), "vkCreateCommandPool")
        self._cmd_pool = pool[0]
        alloc = ffi.new("VkCommandBufferAllocateInfo *", {
            "sType": vk.ST_COMMAND_BUFFER_ALLOCATE_INFO, "commandPool": self._cmd_pool,
            "level": vk.COMMAND_BUFFER_LEVEL_PRIMARY, "commandBufferCount": 1,
        })  # fmt: skip
        self._cmd = ffi.new("VkCommandBuffer[1]")
        check(lib.vkAllocateCommandBuffers(device, alloc, self._cmd), "vkAllocateCommandBuffers")
        sizes = ffi.new("VkDescriptorPoolSize *", {
            "type": vk.DESCRIPTOR_TYPE_STORAGE_BUFFER,
            "descriptorCount": MAX_SETS * MAX_BUFFERS_PER_SET,
        })  # fmt: skip
        dp_info = ffi.new("VkDescriptorPoolCreateInfo *", {
            "sType": vk.ST_DESCRIPTOR_POOL_CREATE_INFO, "maxSets": MAX_SETS, "poolSizeCount": 1,
            "pPoolSizes": sizes,
        })  # fmt: skip
        dpool = ffi.new("VkDescriptorPool *")
        check(lib.vkCreateDescriptorPool(device, dp_info, ffi.NULL, dpool),
              "vkCreateDescriptorPool")  # fmt: skip
        self._desc_pool = dpool[0]
        fence_info = ffi.new("VkFenceCreateInfo *", {"sType": vk.ST_FENCE_CREATE_INFO})
        self._fence = ffi.new("VkFence[1]")
        check(lib.vkCreateFence(device, fence_info, ffi.NULL, self._fence), "vkCreateFence")

    def run(self, record: Callable[[Recorder], None]) -> None:
        """Record through `record`, submit, and wait until the device has finished."""
        lib, device, cmd = self._dev.lib, self._dev.device, self._cmd[0]
        begin = ffi.new("VkCommandBufferBeginInfo *", {
            "sType": vk.ST_COMMAND_BUFFER_BEGIN_INFO, "flags": vk.COMMAND_BUFFER_ONE_TIME_SUBMIT,
        })  # fmt: skip
        check(lib.vkBeginCommandBuffer(cmd, begin), "vkBeginCommandBuffer")
        try:
            recorder = Recorder(self._dev, self._pipelines, cmd, self._desc_pool)
            record(recorder)
            recorder.host_barrier()
        finally:
            check(lib.vkEndCommandBuffer(cmd), "vkEndCommandBuffer")
        submit = ffi.new("VkSubmitInfo *", {
            "sType": vk.ST_SUBMIT_INFO, "commandBufferCount": 1, "pCommandBuffers": self._cmd,
        })  # fmt: skip
        try:
            check(lib.vkResetFences(device, 1, self._fence), "vkResetFences")
            check(lib.vkQueueSubmit(self._dev.queue, 1, submit, self._fence[0]), "vkQueueSubmit")
            check(lib.vkWaitForFences(device, 1, self._fence, 1, 0xFFFFFFFFFFFFFFFF),
                  "vkWaitForFences")  # fmt: skip
        finally:
            lib.vkResetDescriptorPool(device, self._desc_pool, 0)

    def close(self) -> None:
        lib, device = self._dev.lib, self._dev.device
        if device is None:
            return
        lib.vkDestroyFence(device, self._fence[0], ffi.NULL)
        lib.vkDestroyDescriptorPool(device, self._desc_pool, ffi.NULL)
        lib.vkDestroyCommandPool(device, self._cmd_pool, ffi.NULL)


# -----------------------------------------------------------------------------
# The per-process Vulkan runtime: one device, its pipelines, its submitter, and uploads.
#
# Opened on first use and kept (creating a device costs tens of milliseconds to seconds);
# `runtime()` raises VulkanUnavailableError, with the reason, where Vulkan cannot run.

STAGING_BYTES = 64 << 20  # uploads go through at most this much host-visible memory at once
DEVICE_ENV = "DS4_VULKAN_DEVICE"


class VulkanRuntime:
    def __init__(self, dev: VulkanDevice, *, subgroups: bool | None = None) -> None:
        """subgroups: None uses subgroup reductions where the device has them; False forces
        the shared-memory variants (tests check both on one device)."""
        self.dev = dev
        self.subgroups = dev.subgroup_arithmetic if subgroups is None else (
            subgroups and dev.subgroup_arithmetic)  # fmt: skip
        self.pipelines = PipelineCache(dev, subgroups=self.subgroups)
        self._submitter = Submitter(dev, self.pipelines)
        self._lock = threading.Lock()  # one submission at a time on the one queue
        self._owner: int | None = None
        self._scratch: dict[tuple[int, str], Buffer] = {}
        self._constants: dict[str, Buffer] = {}
        self._tables_lock = threading.Lock()

    def run(self, record: Callable[[Recorder], None]) -> None:
        if self._lock.locked() and self._owner == threading.get_ident():
            raise Ds4Error("Vulkan: a submission was started while recording another")
        with self._lock:
            self._owner = threading.get_ident()
            try:
                self._submitter.run(record)
            finally:
                self._owner = None

    def host_buffer(self, nbytes: int) -> Buffer:
        return create_buffer(self.dev, nbytes, host_visible=True)

    def device_buffer(self, nbytes: int) -> Buffer:
        return create_buffer(self.dev, nbytes, host_visible=False)

    def upload(self, data: npt.NDArray[Any]) -> Buffer:
        """A device-local copy of `data`'s bytes (e.g. raw GGUF blocks), through staging."""
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        if raw.nbytes > self.dev.max_storage_range:
            raise Ds4Error(f"{raw.nbytes} bytes exceed this device's storage buffer range "
                           f"({self.dev.max_storage_range}); split the tensor")  # fmt: skip
        dst = self.device_buffer(raw.nbytes)
        staging = self.host_buffer(min(raw.nbytes, STAGING_BYTES))
        try:
            for start in range(0, raw.nbytes, STAGING_BYTES):
                chunk = raw[start : start + STAGING_BYTES]
                staging.write(chunk)
                size = -(-chunk.nbytes // 4) * 4
                self.run(_copy_step(staging, dst, size, start))
        finally:
            staging.release()
        return dst

    def scratch(self, name: str, nbytes: int) -> Buffer:
        """A host-visible buffer of at least nbytes kept under `name` for reuse, one per
        calling thread (so concurrent sessions never share staging; submissions are
        serialized by run())."""
        key = (threading.get_ident(), name)
        with self._tables_lock:
            have = self._scratch.get(key)
            if have is None or have.size < nbytes:
                if have is not None:
                    have.release()
                have = self._scratch[key] = self.host_buffer(max(nbytes, 256))
        return have

    def constant(self, name: str, data: npt.NDArray[Any]) -> Buffer:
        """A device-local table uploaded once per runtime (e.g. the IQ2_XXS grid)."""
        with self._tables_lock:
            have = self._constants.get(name)
            if have is None:
                have = self._constants[name] = self.upload(data)
        return have

    def close(self) -> None:
        for buf in [*self._scratch.values(), *self._constants.values()]:
            buf.release()
        self._submitter.close()
        self.pipelines.close()
        self.dev.close()


def _copy_step(src: Buffer, dst: Buffer, size: int, at: int) -> Callable[[Recorder], None]:
    def record(rec: Recorder) -> None:
        rec.copy(src, dst, size, 0, at)

    return record


class _Shared:
    """The process's one runtime, or why there is none (the failure is remembered too)."""

    lock = threading.Lock()
    runtime: VulkanRuntime | None = None
    error: VulkanUnavailableError | None = None


def runtime() -> VulkanRuntime:
    """The process's runtime, opened on first use."""
    with _Shared.lock:
        if _Shared.runtime is None and _Shared.error is None:
            try:
                spirv_dir()
                _Shared.runtime = VulkanRuntime(open_device(_device_index()))
            except VulkanUnavailableError as exc:
                _Shared.error = exc
        if _Shared.runtime is None:
            assert _Shared.error is not None
            raise _Shared.error
        return _Shared.runtime


def unavailable_reason() -> str | None:
    """None when Vulkan runs here, else why not (for skips and `--backend vulkan` errors)."""
    try:
        runtime()
    except VulkanUnavailableError as exc:
        return str(exc)
    return None


def _device_index() -> int | None:
    text = os.environ.get(DEVICE_ENV)
    if text is None or text == "":
        return None
    if not text.isdigit():
        raise VulkanUnavailableError(f"{DEVICE_ENV}={text!r} is not a device index (0, 1, ...)")
    return int(text)
