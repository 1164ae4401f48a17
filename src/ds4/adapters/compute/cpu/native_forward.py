"""The forward pass with one native call per layer (ds4_fw_layer_forward) and one for
the head: Python only looks up the embedding rows, reserves state room and hands
pointers over. The per-layer state is the reference engine's (LayerState), so sessions,
rewinds and snapshots are shared with the other backends.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.adapters.compute.cpu.native_layout import NativeLayout
from ds4.adapters.compute.reference.kv_state import CompressorHistory, LayerState
from ds4.adapters.compute.reference.weights import WeightStore
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.model_file import ModelFile

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

_ffi = _native_cpu.ffi
_lib = _native_cpu.lib

_ERRORS = {
    1: "weight type not supported",
    2: "tensor shapes do not agree",
    3: "kernel implementation not available on this CPU",
    4: "out of memory",
    5: "expert id out of range",
    20: "layer state missing or too small",
    21: "token id outside the hash-routing table",
    22: "compressed-row capacity exceeded",
}


def _fptr(arr: F32) -> Any:
    return _ffi.cast("float *", arr.ctypes.data)


class NativeForward:
    """Forward-compatible (run/head) evaluation on the native layer kernels.

    impl_code: the kernel set (1 = scalar: model.md's strict arithmetic, bit for bit).
    `native_seconds` accumulates the time spent inside native calls, so a benchmark can
    report Python's share of a decode step.
    """

    def __init__(
        self, hp: DeepSeekV4HParams, model: ModelFile, weights: WeightStore, impl_code: int
    ) -> None:
        self.hp = hp
        self.weights = weights
        self.layout = NativeLayout(model, hp, weights)
        self.opts = _ffi.new("ds4_fw_opts *", {"impl": impl_code})
        self._cstates = [_ffi.new("ds4_fw_state *") for _ in range(hp.n_layer)]
        self.native_seconds = 0.0

    def _bind_comp(self, dst: Any, comp: CompressorHistory, end: int) -> None:
        dst.kv = _fptr(comp.kv.reserve(end))
        dst.score = _fptr(comp.score.reserve(end))
        cap = end // comp.ratio + 1
        dst.rows = _fptr(comp.rows.reserve(cap))
        dst.n_rows, dst.rows_cap = comp.rows.n, cap

    def _bind(self, il: int, state: LayerState, start: int, end: int) -> Any:
        if state.raw.n != start:
            raise Ds4Error(f"layer {il} holds {state.raw.n} positions, expected {start}")
        c = self._cstates[il]
        c.raw = _fptr(state.raw.reserve(end))
        c.attn.kv = c.attn.score = c.attn.rows = c.index.kv = c.index.score = _ffi.NULL
        c.index.rows = _ffi.NULL
        if state.attn is not None:
            self._bind_comp(c.attn, state.attn, end)
        if state.index is not None:
            self._bind_comp(c.index, state.index, end)
        return c

    @staticmethod
    def _commit(state: LayerState, c: Any, end: int) -> None:
        state.raw.n = end
        for comp, cc in ((state.attn, c.attn), (state.index, c.index)):
            if comp is not None:
                comp.kv.n = comp.score.n = end
                comp.rows.n = int(cc.n_rows)

    def run(self, tokens: I64, positions: I64, states: list[LayerState]) -> F32:
        """Evaluate consecutive positions into the states; return streams (n, S, D)."""
        hp, n = self.hp, int(tokens.size)
        start = int(positions[0]) if n else 0
        if n and not np.array_equal(positions, np.arange(start, start + n)):
            raise Ds4Error("the native forward takes consecutive positions")
        e = self.weights.rows("token_embd.weight", tokens)
        streams = np.ascontiguousarray(np.repeat(e[:, None, :], hp.n_hc, axis=1), np.float32)
        ids = np.ascontiguousarray(tokens, dtype=np.int32)
        sp, tp = _fptr(streams), _ffi.cast("int32_t *", ids.ctypes.data)
        end = start + n
        for il in range(hp.n_layer):
            c = self._bind(il, states[il], start, end)
            t0 = time.perf_counter()
            rc = _lib.ds4_fw_layer_forward(self.layout.layers[il], c, sp, tp, start, n, self.opts)
            self.native_seconds += time.perf_counter() - t0
            if rc:
                states[il].truncate(start)
                raise Ds4Error(f"layer {il}: {_ERRORS.get(rc, f'native error {rc}')}")
            self._commit(states[il], c, end)
        return streams

    def head(self, streams: F32) -> F32:
        """Logits (n, V) from final streams (n, S, D)."""
        s = np.ascontiguousarray(streams, dtype=np.float32)
        out = np.empty((s.shape[0], int(self.layout.head.output.rows)), dtype=np.float32)
        t0 = time.perf_counter()
        rc = _lib.ds4_fw_head_forward(self.layout.head, _fptr(s), s.shape[0], _fptr(out), self.opts)
        self.native_seconds += time.perf_counter() - t0
        if rc:
            raise Ds4Error(f"output head: {_ERRORS.get(rc, f'native error {rc}')}")
        return out
