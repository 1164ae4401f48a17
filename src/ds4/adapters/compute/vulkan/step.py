"""One forward step's device work (docs/vulkan.md#device-forward).

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

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.adapters.compute.vulkan.submission import Recorder

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


class Step:
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
