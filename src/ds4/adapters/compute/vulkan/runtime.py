"""The per-process Vulkan runtime: one device, its pipelines, its submitter, and uploads.

Opened on first use and kept (creating a device costs tens of milliseconds to seconds);
`runtime()` raises VulkanUnavailableError, with the reason, where Vulkan cannot run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer, create_buffer
from ds4.adapters.compute.vulkan.device import VulkanDevice, open_device
from ds4.adapters.compute.vulkan.pipelines import PipelineCache
from ds4.adapters.compute.vulkan.shaders import spirv_dir
from ds4.adapters.compute.vulkan.submission import Recorder, Submitter
from ds4.adapters.compute.vulkan.vk_api import VulkanUnavailableError
from ds4.domain.errors import Ds4Error

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
