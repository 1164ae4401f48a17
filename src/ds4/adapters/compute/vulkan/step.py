"""One forward step's device work, and the sequence state it reads and grows in device
memory (docs/vulkan.md#device-forward, docs/adr/0066-vulkan-device-forward.md).

A step's values live on the device, on the host, or both (`Value`); device ops are
recorded, not run, and go to the GPU as one submission when the host must look at a
result (a host fallback, the logits) or the step ends. So a step costs one submission
plus one per host fallback it still takes; `submissions` counts them and `fallbacks`
names each host detour taken, for the status table and `ds4 bench`.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.state import CompressorHistory, GrowRows, LayerState
from ds4.adapters.compute.vulkan.device import Buffer
from ds4.adapters.compute.vulkan.runtime import Recorder, VulkanRuntime
from ds4.domain.model.hparams import DeepSeekV4HParams

Op = Callable[[Recorder], None]
ALIGN = 16
MIN_ARENA = 1 << 20


class Value:
    """A step value: `buf` on the device (row-major, from byte 0), `arr` on the host."""

    __slots__ = ("arr", "buf", "dtype", "shape")

    def __init__(
        self, shape: tuple[int, ...], dtype: npt.DTypeLike = np.float32, *,
        buf: Buffer | None = None, arr: npt.NDArray[Any] | None = None,
    ) -> None:  # fmt: skip
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.buf = buf
        self.arr = arr

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    def changed_on_device(self) -> None:
        """An in-place device op wrote buf: the host copy is stale."""
        self.arr = None


class BufferPool:
    """Device-local buffers by power-of-two size class, reused from step to step (a
    decode step asks for the same sizes every time), and one host-visible arena."""

    def __init__(self, rt: VulkanRuntime) -> None:
        self.rt = rt
        self._free: dict[tuple[int, bool], list[Buffer]] = {}
        self._lock = threading.Lock()
        self.arena_bytes = MIN_ARENA  # grows to the largest a step needed, so the next fits

    def take(self, nbytes: int) -> Buffer:
        return self._take(nbytes, host=False)

    def take_host(self, nbytes: int) -> Buffer:
        return self._take(nbytes, host=True)

    def _take(self, nbytes: int, *, host: bool) -> Buffer:
        size = max(256, 1 << (max(nbytes, 1) - 1).bit_length())
        with self._lock:
            spare = self._free.get((size, host))
            if spare:
                return spare.pop()
        return self.rt.host_buffer(size) if host else self.rt.device_buffer(size)

    def give(self, bufs: list[Buffer]) -> None:
        with self._lock:
            for b in bufs:
                self._free.setdefault((b.size, b.host_visible), []).append(b)

    def close(self) -> None:
        with self._lock:
            for bufs in self._free.values():
                for b in bufs:
                    b.release()
            self._free.clear()


class DeviceStep:
    """Records one step's ops; flushes them as one submission when the host needs data."""

    def __init__(self, rt: VulkanRuntime, pool: BufferPool) -> None:
        self.rt = rt
        self._pool = pool
        self._ops: list[Op] = []
        self._held: list[Buffer] = []
        self._retired: list[Buffer] = []
        self._arena: Buffer | None = None
        self._used = 0
        self.submissions = 0
        self.fallbacks: Counter[str] = Counter()

    # ---- recording -----------------------------------------------------------

    def record(self, op: Op) -> None:
        self._ops.append(op)

    @property
    def pending(self) -> int:
        """Ops recorded since the last submission."""
        return len(self._ops)

    def copy(self, src: Buffer, dst: Buffer, nbytes: int, src_off: int = 0,
             dst_off: int = 0) -> None:  # fmt: skip
        if nbytes > 0:
            self._ops.append(lambda rec: rec.copy(src, dst, nbytes, src_off, dst_off))

    def new(self, shape: tuple[int, ...], dtype: npt.DTypeLike = np.float32) -> Value:
        """A device value whose contents the next recorded op writes."""
        v = Value(shape, dtype)
        v.buf = self.alloc(v.nbytes)
        return v

    def alloc(self, nbytes: int) -> Buffer:
        buf = self._pool.take(nbytes)
        self._held.append(buf)
        return buf

    def retire(self, buf: Buffer) -> None:
        """Release buf once this step's recorded ops no longer need it."""
        self._retired.append(buf)

    # ---- placement -----------------------------------------------------------

    def host(self, arr: npt.ArrayLike, dtype: npt.DTypeLike = np.float32) -> Value:
        a = np.ascontiguousarray(arr, dtype=dtype)
        return Value(a.shape, a.dtype, arr=a)

    def dev(self, v: Value) -> Buffer:
        """v's device buffer, uploading its host copy (recorded) if it has none."""
        if v.buf is None:
            assert v.arr is not None
            buf = self.alloc(v.nbytes)
            self.upload_into(v.arr, buf, 0)
            v.buf = buf
        return v.buf

    def upload_into(self, arr: npt.NDArray[Any], dst: Buffer, dst_off: int) -> None:
        """Record a copy of arr's bytes into dst at dst_off (staged through the arena)."""
        raw = np.ascontiguousarray(arr)
        if raw.nbytes == 0:
            return
        at = self._arena_room(raw.nbytes)
        assert self._arena is not None
        self._arena.write(raw, at)
        self.copy(self._arena, dst, raw.nbytes, at, dst_off)

    def np(self, *values: Value) -> list[npt.NDArray[Any]]:
        """Host copies of values, downloading (one submission) those only on the device."""
        need = [v for v in values if v.arr is None]
        if need:
            total = sum(-(-v.nbytes // ALIGN) * ALIGN for v in need)
            spots = []
            base = self._arena_room(total)
            assert self._arena is not None
            arena = self._arena
            for v in need:
                assert v.buf is not None
                spots.append(base)
                self.copy(v.buf, arena, v.nbytes, 0, base)
                base += -(-v.nbytes // ALIGN) * ALIGN
            self.flush()
            for v, at in zip(need, spots, strict=True):
                count = int(np.prod(v.shape))
                v.arr = arena.read(v.dtype, count, at).reshape(v.shape)
        out = []
        for v in values:
            assert v.arr is not None
            out.append(v.arr)
        return out

    def fallback(self, name: str) -> None:
        """Count one host detour by name (docs/vulkan.md#status lists them)."""
        self.fallbacks[name] += 1

    # ---- submission ------------------------------------------------------------

    def flush(self) -> None:
        """Submit what is recorded (one command buffer) and wait for it."""
        if not self._ops:
            return
        ops, self._ops = self._ops, []

        def record(rec: Recorder) -> None:
            for op in ops:
                op(rec)
                rec.barrier()

        self.rt.run(record)
        self.submissions += 1
        self._used = 0

    def close(self) -> None:
        """Finish the step: submit what is left (state growth copies included, so even a
        step abandoned on a host-side error leaves the state buffers whole), hand
        buffers back."""
        try:
            self.flush()
        finally:
            self._ops = []
            self._pool.give(self._held)
            self._held = []
            for b in self._retired:
                b.release()
            self._retired = []
            if self._arena is not None:
                self._pool.give([self._arena])
                self._arena = None

    def _arena_room(self, nbytes: int) -> int:
        """An arena offset with nbytes free; flushes (and grows the arena) when full."""
        nbytes = -(-nbytes // ALIGN) * ALIGN
        if self._arena is not None and self._used + nbytes <= self._arena.size:
            at = self._used
            self._used += nbytes
            return at
        self.flush()  # what is recorded still reads the current arena
        if self._arena is None or nbytes > self._arena.size:
            if self._arena is not None:
                self._pool.give([self._arena])
            self._pool.arena_bytes = max(self._pool.arena_bytes, nbytes, 2 * self._used)
            self._arena = self._pool.take_host(self._pool.arena_bytes)
        self._used = nbytes
        return 0


# -----------------------------------------------------------------------------
# A sequence's per-layer state in device memory, mirroring reference/state.py's
# LayerState row for row (docs/adr/0066-vulkan-device-forward.md).
#
# Each GrowRows becomes a DeviceRows: one device buffer of `capacity` rows addressed by
# absolute position from `base`, grown by doubling with a device copy when a chunk needs
# more room, truncated by moving `n`, trimmed by copying the kept tail down once half the
# buffer is dead (as GrowRows does). The host never reads these rows during a forward;
# payloads, clones and checkpoints go through LayerState (download/upload below), so the
# DSV4 payload code is shared with the cpu and reference backends.

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

    def reserve(self, step: DeviceStep, end: int) -> Buffer:
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

    def download(self, step: DeviceStep, into: GrowRows) -> None:
        """Make `into` hold this history (rows base..n); one submission."""
        download_all(step, [(self, into)])

    def stage_download(self, step: DeviceStep) -> Value | None:
        """Record a copy of rows base..n into a step value (None when there are none)."""
        count = self.n - self.base
        if count == 0 or self.buf is None:
            return None
        tmp = step.new((count, self.width))
        assert tmp.buf is not None
        step.copy(self.buf, tmp.buf, count * self.row_bytes)
        return tmp

    def upload(self, step: DeviceStep, src: GrowRows) -> None:
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

    def download(self, step: DeviceStep, hp: DeepSeekV4HParams, layer: int) -> LayerState:
        return download_layers(step, [self], hp, [layer])[0]

    def pairs(self, host: LayerState) -> list[tuple[DeviceRows, GrowRows]]:
        """Each device history with the host history it mirrors."""
        out = [(self.raw, host.raw)]
        for dev, mine in ((self.attn, host.attn), (self.index, host.index)):
            if dev is not None and mine is not None:
                out += list(zip(dev.parts(), (mine.kv, mine.score, mine.rows), strict=True))
        return out

    def upload(self, step: DeviceStep, host: LayerState) -> None:
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


def download_all(step: DeviceStep, pairs: list[tuple[DeviceRows, GrowRows]]) -> None:
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
    step: DeviceStep, devs: list[DeviceLayerState], hp: DeepSeekV4HParams, layers: list[int]
) -> list[LayerState]:
    """Host LayerStates of these device states (one submission for all)."""
    hosts = [LayerState(hp, il) for il in layers]
    download_all(step, [p for d, h in zip(devs, hosts, strict=True) for p in d.pairs(h)])
    return hosts
