"""SSD streaming on the cpu backend (docs/ssd-streaming.md): the native expert cache
(native/cpu/ds4_expert_cache.h) sized from the budget, hooked into every layer of the
native layout, non-routed weights pre-faulted, the profile preloaded and written back."""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.adapters.compute.cpu.native_layout import NativeLayout
from ds4.adapters.system import SystemMemory
from ds4.domain.errors import Ds4Error
from ds4.domain.expert_cache import (
    GIB,
    Budget,
    ExpertCacheStats,
    StreamingOptions,
    cache_slots,
    half_life_uses,
    hottest,
    merged,
    parse_profile,
    profile_text,
)
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.model_file import ModelFile

_ffi = _native_cpu.ffi
_lib = _native_cpu.lib

EXPERT_PARTS = ("ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight")
PART_ALIGN = 64  # each part's place in a slot (PART_ALIGN in expert_cache.c)
_POLICY_CODES = {"lru": 0, "decayed": 1}
# Room kept for the KV cache, compressor history and the kernels' scratch when the
# budget is automatic: the context is not known when the model loads.
KV_AND_SCRATCH_RESERVE = 1 * GIB
PAGE = 4096


def available_memory() -> int:
    """The memory this process can really have (bytes): the smallest of MemAvailable,
    the memory cgroup's room and RLIMIT_AS's (domain/memory.py), else physical memory.
    Inside a 5 GiB cgroup that is the cgroup's room, not the host's MemAvailable."""
    return SystemMemory().limits().room()[0]


def _round(n: int) -> int:
    return (n + PART_ALIGN - 1) // PART_ALIGN * PART_ALIGN


def _size(n: int) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / 2**20:.2f} MiB"


class ExpertStreaming:
    """The cache of one loaded model; `layout`'s layers read their experts through it."""

    def __init__(
        self,
        model: ModelFile,
        hp: DeepSeekV4HParams,
        layout: NativeLayout,
        options: StreamingOptions,
        log: Callable[[str], None],
    ) -> None:
        self.hp, self.options, self._model = hp, options, model
        parts = []  # per layer: (offsets, per-expert bytes) of gate, up, down
        for il in range(hp.n_layer):
            infos = [model.tensors[f"blk.{il}.{p}"] for p in EXPERT_PARTS]
            parts.append(([i.offset for i in infos], [i.nbytes // hp.n_expert for i in infos]))
        slot_bytes = max(sum(_round(b) for b in sizes) for _, sizes in parts)
        expert_bytes = sum(sum(sizes) for _, sizes in parts)  # all experts of all layers
        self.expert_bytes_total = expert_bytes * hp.n_expert
        expert_names = {f"blk.{il}.{p}" for il in range(hp.n_layer) for p in EXPERT_PARTS}
        resident = [n for n in model.tensors if n not in expert_names]
        self.resident_bytes = sum(model.tensors[n].nbytes for n in resident)
        available = available_memory() - options.simulate_used_bytes
        self.budget: Budget = cache_slots(
            options.cache,
            expert_bytes=slot_bytes,
            total_experts=hp.n_layer * hp.n_expert,
            available=available,
            resident=self.resident_bytes,
            kv_and_scratch=KV_AND_SCRATCH_RESERVE,
        )
        slots = self.budget.slots
        self.half_life = half_life_uses(options, hp.n_layer, hp.n_expert_used)
        if options.cold:
            self._drop_page_cache()
        c = _lib.ds4_xc_new(
            model.path.encode(), hp.n_layer, hp.n_expert, slots, slot_bytes,
            _POLICY_CODES[options.policy], self.half_life, int(options.direct),
        )  # fmt: skip
        if c == _ffi.NULL:
            raise Ds4Error(
                f"cannot set up the expert cache ({slots} slots of {slot_bytes} bytes): "
                f"{os.strerror(_ffi.errno)}"
            )
        self._c = _ffi.gc(c, _lib.ds4_xc_free)
        for il, (offsets, sizes) in enumerate(parts):
            rc = _lib.ds4_xc_set_layer(
                self._c, il, _ffi.new("uint64_t[3]", offsets), _ffi.new("size_t[3]", sizes)
            )
            if rc:
                raise Ds4Error(f"layer {il}: its experts do not fit a cache slot")
            layout.layers[il].xc = self._c
            layout.layers[il].layer_id = il
            if options.readahead and il + 1 < hp.n_layer:  # its router predicts for us
                layout.layers[il].next = layout.layers + (il + 1)
        self._prefault(resident)
        locked = self._lock(resident, slots * slot_bytes) if options.lock else 0
        _lib.ds4_xc_set_readahead(self._c, min(options.readahead, hp.n_expert))
        log(
            f"ssd streaming: {slots} expert slots x {_size(slot_bytes)} = "
            f"{_size(slots * slot_bytes)} of {_size(self.expert_bytes_total)} "
            f"routed experts ({self.budget.reason}); {_size(self.resident_bytes)} "
            f"resident; policy {options.policy}; read-ahead {options.readahead}; reads "
            f"{'O_DIRECT' if _lib.ds4_xc_direct(self._c) else 'pread + FADV_DONTNEED'}"
            + (f"; {_size(locked)} locked in memory" if options.lock else "")
        )
        self._profile_counts = self._read_profile()
        if options.profile is not None:
            atexit.register(self._write_profile_at_exit)
        if options.preload:
            loaded = self.preload(options.preload)
            log(f"ssd streaming: preloaded {loaded} experts from the profile")

    # ---- start-up --------------------------------------------------------------

    def _drop_page_cache(self) -> None:
        fd = os.open(self._model.path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def _prefault(self, names: list[str]) -> None:
        """Touch one byte per page of every non-routed tensor, so the first tokens do
        not fault them in one at a time."""
        for name in names:
            raw = self._model.raw(name).reshape(-1)
            if raw.size:
                int(np.add.reduce(raw[::PAGE], dtype=np.uint64))

    def _lock(self, names: list[str], arena_bytes: int) -> int:
        """mlock the expert cache and every non-routed tensor; Ds4Error when refused."""
        total = arena_bytes + sum(self._model.tensors[n].nbytes for n in names)
        err = _lib.ds4_xc_lock_arena(self._c)
        for name in names:
            if err:
                break
            raw = self._model.raw(name)
            if raw.size:
                err = _lib.ds4_xc_lock_range(_ffi.cast("void *", raw.ctypes.data), raw.nbytes)
        if err:
            raise Ds4Error(
                f"--ssd-streaming-mlock: cannot lock {_size(total)} in memory "
                f"({os.strerror(err)}); raise the locked-memory limit (ulimit -l) or drop "
                "the flag (the weights are still pre-faulted)"
            )
        return total

    def _read_profile(self) -> list[int] | None:
        path = self.options.profile
        if path is None or not Path(path).exists():
            return None
        try:
            text = Path(path).read_text(encoding="utf-8")
            return parse_profile(text, self.hp.n_layer, self.hp.n_expert)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise Ds4Error(f"--expert-profile {path}: {exc}") from None

    def preload(self, limit: int) -> int:
        """Load up to `limit` of the profile's hottest experts (never more than fit)."""
        if self._profile_counts is None:
            return 0
        picks = hottest(self._profile_counts, self.hp.n_expert, min(limit, self.budget.slots))
        for layer, expert in picks:
            rc = _lib.ds4_xc_prefetch(self._c, layer, expert)
            if rc:
                raise Ds4Error(f"preloading layer {layer} expert {expert}: native error {rc}")
        _lib.ds4_xc_reset_stats(self._c)
        return len(picks)

    # ---- counters --------------------------------------------------------------

    def stats(self) -> ExpertCacheStats:
        s = _ffi.new("ds4_xc_stats *")
        loaded, used = _ffi.new("uint64_t *"), _ffi.new("uint64_t *")
        predicted, actual, correct = (_ffi.new("uint64_t *") for _ in range(3))
        _lib.ds4_xc_get_stats(self._c, s)
        _lib.ds4_xc_readahead_counts(self._c, loaded, used)
        _lib.ds4_xc_prediction_counts(self._c, predicted, actual, correct)
        return ExpertCacheStats(
            self.budget.slots, int(s.resident), int(s.accesses), int(s.hits), int(s.misses),
            int(s.evictions), int(s.bytes_read), s.read_ns / 1e9, s.stall_ns / 1e9,
            int(loaded[0]), int(used[0]), int(predicted[0]), int(actual[0]), int(correct[0]),
        )  # fmt: skip

    def counts(self) -> list[int]:
        out = np.zeros(self.hp.n_layer * self.hp.n_expert, dtype=np.uint64)
        _lib.ds4_xc_get_counts(self._c, _ffi.cast("uint64_t *", out.ctypes.data))
        return [int(v) for v in out]

    def record_trace(self, capacity: int) -> Callable[[], list[int]]:
        """Start recording accesses (key = layer * n_expert + expert); the returned
        call stops and gives the trace."""
        buf = np.zeros(capacity, dtype=np.int32)
        _lib.ds4_xc_set_trace(self._c, _ffi.cast("int32_t *", buf.ctypes.data), capacity)

        def stop() -> list[int]:
            n = int(_lib.ds4_xc_trace_len(self._c))
            _lib.ds4_xc_set_trace(self._c, _ffi.NULL, 0)
            return [int(v) for v in buf[:n]]

        return stop

    def _write_profile_at_exit(self) -> None:
        try:
            self.write_profile()
        except Ds4Error as exc:
            print(f"ds4: {exc}", file=sys.stderr)

    def write_profile(self) -> None:
        """Add this run's counts to --expert-profile (atomically: tmp + rename)."""
        path = self.options.profile
        if path is None:
            return
        counts = self.counts()
        if self._profile_counts is not None:
            counts = merged(self._profile_counts, counts)
        text = profile_text(self.hp.n_layer, self.hp.n_expert, counts)
        tmp = Path(f"{path}.tmp{os.getpid()}")
        try:
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise Ds4Error(f"--expert-profile {path}: cannot write: {exc.strerror}") from None
