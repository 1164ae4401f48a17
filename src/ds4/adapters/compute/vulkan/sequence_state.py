"""VulkanState: the SequenceState port with the KV state resident on the device.

The device state is the truth while the sequence decodes; the host LayerStates the
reference session code reads (payloads, clones, checkpoints) are downloaded when asked
for, and a restored or assigned host state is uploaded before the next step. Truncate
and trim act on the device counters and buffers directly, so rewinds cost no transfer.
"""

from __future__ import annotations

import copy
import weakref

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.forward import Forward
from ds4.adapters.compute.reference.state import LayerState, ReferenceState
from ds4.adapters.compute.vulkan.device_state import DeviceLayerState, download_layers
from ds4.adapters.compute.vulkan.forward import VulkanForward
from ds4.adapters.compute.vulkan.step import Step, Value
from ds4.domain.engine.compressor_frontier import frontier_start
from ds4.domain.errors import Ds4Error
from ds4.ports.compute import SequenceState

F32 = npt.NDArray[np.float32]


class VulkanState(ReferenceState):
    def __init__(self, device: VulkanForward, host: Forward, ctx: int) -> None:
        """host: the reference forward on the same device weights, for what the device
        path does not do (steering and activation capture)."""
        self._dev_fwd = device
        self._device: list[DeviceLayerState] | None = None
        self._host: list[LayerState] | None = None
        super().__init__(host, ctx)
        self._release = weakref.finalize(self, _release, [])

    # ---- where the truth lives -------------------------------------------------------

    @property
    def layers(self) -> list[LayerState]:
        """The host view (downloaded from the device when the device is ahead)."""
        if self._host is None:
            if self._device is None:
                raise Ds4Error("vulkan: this sequence's state was lost when the device failed "
                               "mid-step; start a new session")  # fmt: skip
            fwd = self._dev_fwd
            step = fwd.step()
            try:
                layers = list(range(len(self._device)))
                self._host = download_layers(step, self._device, fwd.hp, layers)
            finally:
                step.close()
        return self._host

    @layers.setter
    def layers(self, states: list[LayerState]) -> None:
        self._host = states
        self._drop_device()

    def _on_device(self) -> list[DeviceLayerState]:
        if self._device is None:
            fwd = self._dev_fwd
            host = self.layers
            rt = fwd.store.rt
            dev = [DeviceLayerState(rt, fwd.hp, il) for il in range(fwd.hp.n_layer)]
            step = fwd.step()
            try:
                for d, s in zip(dev, host, strict=True):
                    d.upload(step, s)
            finally:
                step.close()
            self._device = dev
            self._release.detach()
            self._release = weakref.finalize(self, _release, dev)
        return self._device

    def _drop_device(self) -> None:
        if self._device is not None:
            self._release()
            self._device = None

    # ---- the port --------------------------------------------------------------------

    @property
    def length(self) -> int:
        if self._device is not None:
            return self._device[0].raw.n
        return self.layers[0].raw.n

    def forward_streams(
        self, tokens: npt.NDArray[np.int64], all_logits: bool, keep: int
    ) -> tuple[F32, F32]:
        host_fwd = self._fwd
        assert isinstance(host_fwd, Forward)
        if host_fwd.steering is not None or host_fwd.capture_component is not None:
            self.layers  # noqa: B018 -- bring the host view up to date
            self._drop_device()
            return super().forward_streams(tokens, all_logits, keep)  # host forward
        dev = self._on_device()
        start = self.length
        fwd = self._dev_fwd
        positions = np.arange(start, start + tokens.size, dtype=np.int64)
        step = fwd.step()
        try:
            streams = fwd.run_device(step, tokens, positions, dev)
            self._host = None  # the device is ahead from here on
            n = int(tokens.size)
            last = streams if all_logits else _last_rows(step, streams, n)
            (logits,) = step.np(fwd.head_device(step, last))
            k = min(keep, n)
            if k:
                (s,) = step.np(streams)
                kept: F32 = s[n - k :]
            else:
                kept = np.zeros((0, self._hp.n_hc, self._hp.n_embd), np.float32)
        except BaseException:
            try:
                step.close()  # recorded growth copies still land: the buffers stay whole
            except BaseException:
                self._drop_device()  # the device failed mid-step: its state is unknown
                raise
            for d in dev:
                d.truncate(start)  # leave the state as it was before this chunk
            raise
        fwd.finish(step, int(tokens.size))
        out: F32 = logits
        return out, kept

    def truncate(self, n: int) -> None:
        if self._device is not None:
            for d in self._device:
                d.truncate(n)
        if self._host is not None:
            for s in self._host:
                s.truncate(n)

    def trim(self, keep_from: int) -> None:
        if self._device is not None:
            for d in self._device:
                n = d.raw.n
                d.trim(keep_from, [frontier_start(c.ratio, n) for c in d.compressors()])
        if self._host is not None:
            for s in self._host:
                s.trim(keep_from)

    def history_ok(self, m: int) -> bool:
        if self._device is None:
            return super().history_ok(m)
        for d in self._device:
            if max(0, m + 1 - self._hp.n_swa) < d.raw.base:
                return False
            for c in d.compressors():
                need = frontier_start(c.ratio, m)
                if need < m and need < c.kv.base:
                    return False
        return True

    def clone(self) -> SequenceState:
        twin = VulkanState(self._dev_fwd, self._fwd_host(), self._ctx)
        twin.layers = [_copy_layer(s) for s in self.layers]
        return twin

    @property
    def nbytes(self) -> int:
        if self._device is not None:
            return sum(d.nbytes for d in self._device)
        return super().nbytes

    def _fwd_host(self) -> Forward:
        host = self._fwd
        assert isinstance(host, Forward)
        return host


def _last_rows(step: Step, streams: Value, n: int) -> Value:
    """The last token's streams (1, S, D) of (n, S, D), copied on the device."""
    if n == 1:
        return streams
    if streams.arr is not None:
        return step.host(streams.arr[-1:])
    width = int(np.prod(streams.shape[1:]))
    last = step.new((1, *streams.shape[1:]))
    assert last.buf is not None
    step.copy(step.dev(streams), last.buf, width * 4, (n - 1) * width * 4, 0)
    return last


def _copy_layer(s: LayerState) -> LayerState:
    return copy.deepcopy(s)


def _release(dev: list[DeviceLayerState]) -> None:
    for d in dev:
        d.release()
