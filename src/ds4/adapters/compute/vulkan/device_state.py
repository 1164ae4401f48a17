"""A sequence's per-layer state in device memory, mirroring reference/state.py's
LayerState row for row (docs/adr/0066-vulkan-device-forward.md).

Each GrowRows becomes a DeviceRows: one device buffer of `capacity` rows addressed by
absolute position from `base`, grown by doubling with a device copy when a chunk needs
more room, truncated by moving `n`, trimmed by copying the kept tail down once half the
buffer is dead (as GrowRows does). The host never reads these rows during a forward;
payloads, clones and checkpoints go through LayerState (download/upload below), so the
DSV4 payload code is shared with the cpu and reference backends.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.state import CompressorHistory, GrowRows, LayerState
from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.adapters.compute.vulkan.step import Step, Value
from ds4.domain.model.hparams import DeepSeekV4HParams

F32 = npt.NDArray[np.float32]
MIN_ROWS = 16


class DeviceRows:
    def __init__(self, rt: VulkanRuntime, width: int) -> None:
        self.rt = rt
        self.width = width
        self.row_bytes = width * 4
        self.buf: Buffer | None = None
        self.capacity = 0
        self.base = 0
        self.n = 0

    def offset(self, p: int) -> int:
        """Byte offset of absolute row p in buf."""
        return (p - self.base) * self.row_bytes

    def reserve(self, step: Step, end: int) -> Buffer:
        """Room for rows up to absolute `end`, growing (doubling, device copy recorded in
        `step`) when needed; the old buffer is released when the step ends."""
        need = end - self.base
        if self.buf is None or need > self.capacity:
            cap = max(need, 2 * self.capacity, MIN_ROWS)
            grown = self.rt.device_buffer(cap * self.row_bytes)
            if self.buf is not None:
                step.copy(self.buf, grown, (self.n - self.base) * self.row_bytes)
                step.retire(self.buf)
            self.buf, self.capacity = grown, cap
        return self.buf

    def truncate(self, n: int) -> None:
        self.n = max(self.base, min(self.n, n))

    def trim(self, keep_from: int) -> bool:
        """GrowRows.trim on the device: forget rows before keep_from once at least half
        the buffer is dead (then the kept tail and its old place cannot overlap)."""
        keep_from = min(keep_from, self.n)
        drop = keep_from - self.base
        if self.buf is None or drop <= 0 or drop < self.capacity // 2:
            return False
        kept = (self.n - keep_from) * self.row_bytes
        if kept:
            buf, at = self.buf, drop * self.row_bytes
            self.rt.run(lambda rec: rec.copy(buf, buf, kept, at, 0))
        self.base = keep_from
        return True

    def download(self, step: Step, into: GrowRows) -> None:
        """Make `into` hold this history (rows base..n); one submission."""
        download_all(step, [(self, into)])

    def stage_download(self, step: Step) -> Value | None:
        """Record a copy of rows base..n into a step value (None when there are none)."""
        count = self.n - self.base
        if count == 0 or self.buf is None:
            return None
        tmp = step.new((count, self.width))
        assert tmp.buf is not None
        step.copy(self.buf, tmp.buf, count * self.row_bytes)
        return tmp

    def upload(self, step: Step, src: GrowRows) -> None:
        """Take src's kept history (rows src.base..src.n)."""
        self.base = self.n = src.base
        rows = src.view()
        buf = self.reserve(step, src.n)
        step.upload_into(np.ascontiguousarray(rows, dtype=np.float32), buf, 0)
        self.n = src.n

    def release(self) -> None:
        if self.buf is not None:
            self.buf.release()
            self.buf = None
            self.capacity = 0

    @property
    def nbytes(self) -> int:
        return self.capacity * self.row_bytes


class DeviceCompressor:
    def __init__(self, rt: VulkanRuntime, ratio: int, row_width: int, width: int) -> None:
        self.ratio, self.row_width, self.width = ratio, row_width, width
        self.kv = DeviceRows(rt, width)
        self.score = DeviceRows(rt, width)
        self.rows = DeviceRows(rt, row_width)

    def parts(self) -> tuple[DeviceRows, DeviceRows, DeviceRows]:
        return self.kv, self.score, self.rows

    def truncate(self, n_tokens: int) -> None:
        self.kv.truncate(n_tokens)
        self.score.truncate(n_tokens)
        self.rows.truncate(n_tokens // self.ratio)


class DeviceLayerState:
    """raw window rows, and for compressed layers the attention compressor (and the
    indexer's on ratio-4 layers): per-token inputs and emitted rows."""

    def __init__(self, rt: VulkanRuntime, hp: DeepSeekV4HParams, layer: int) -> None:
        probe = LayerState(hp, layer)  # the widths and ratios, exactly as the host has them
        self.ratio = probe.ratio
        self.n_swa = hp.n_swa
        self.raw = DeviceRows(rt, hp.head_dim)
        self.attn = _like(rt, probe.attn)
        self.index = _like(rt, probe.index)

    def compressors(self) -> list[DeviceCompressor]:
        return [c for c in (self.attn, self.index) if c is not None]

    def all_rows(self) -> list[DeviceRows]:
        return [self.raw, *(r for c in self.compressors() for r in c.parts())]

    def truncate(self, n_tokens: int) -> None:
        self.raw.truncate(n_tokens)
        for comp in self.compressors():
            comp.truncate(n_tokens)

    def trim(self, keep_from: int, frontier_start: list[int]) -> None:
        """LayerState.trim's rule; frontier_start: each compressor's first needed token."""
        n = self.raw.n
        self.raw.trim(min(keep_from, n - min(n, self.n_swa)))
        for comp, start in zip(self.compressors(), frontier_start, strict=True):
            comp.kv.trim(min(keep_from, start))
            comp.score.trim(min(keep_from, start))

    def download(self, step: Step, hp: DeepSeekV4HParams, layer: int) -> LayerState:
        return download_layers(step, [self], hp, [layer])[0]

    def pairs(self, host: LayerState) -> list[tuple[DeviceRows, GrowRows]]:
        """Each device history with the host history it mirrors."""
        out = [(self.raw, host.raw)]
        for dev, mine in ((self.attn, host.attn), (self.index, host.index)):
            if dev is not None and mine is not None:
                out += list(zip(dev.parts(), (mine.kv, mine.score, mine.rows), strict=True))
        return out

    def upload(self, step: Step, host: LayerState) -> None:
        for d, h in self.pairs(host):
            d.upload(step, h)

    def release(self) -> None:
        for r in self.all_rows():
            r.release()

    @property
    def nbytes(self) -> int:
        return sum(r.nbytes for r in self.all_rows())


def _like(rt: VulkanRuntime, comp: CompressorHistory | None) -> DeviceCompressor | None:
    if comp is None:
        return None
    return DeviceCompressor(rt, comp.ratio, comp.row_width, comp.width)


def download_all(step: Step, pairs: list[tuple[DeviceRows, GrowRows]]) -> None:
    """Fill each GrowRows from its DeviceRows, all in one submission."""
    staged = [(d, h, d.stage_download(step)) for d, h in pairs]
    values = [v for _, _, v in staged if v is not None]
    got = iter(step.np(*values))
    for d, h, v in staged:
        if v is None:
            h.set_rows(d.n, np.zeros((0, d.width), np.float32))
        else:
            h.set_rows(d.base, next(got))


def download_layers(
    step: Step, devs: list[DeviceLayerState], hp: DeepSeekV4HParams, layers: list[int]
) -> list[LayerState]:
    """Host LayerStates of these device states (one submission for all)."""
    hosts = [LayerState(hp, il) for il in layers]
    download_all(step, [p for d, h in zip(devs, hosts, strict=True) for p in d.pairs(h)])
    return hosts
