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
from ds4.domain.engine_math.numerics import Numerics
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType
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
    return _ffi.cast("float *", _ffi.from_buffer(arr))


class NativeForward:
    """Forward-compatible (run/head) evaluation on the native layer kernels.

    numerics: which rounding points to simulate (quantized weights always take the
    integer dots); impl_code: the kernel set (1 = scalar: with ds4 numerics, model.md's
    strict arithmetic bit for bit).
    `native_seconds` accumulates the time spent inside native calls, so a benchmark can
    report Python's share of a decode step.
    """

    def __init__(
        self,
        hp: DeepSeekV4HParams,
        model: ModelFile,
        weights: WeightStore,
        numerics: Numerics,
        impl_code: int,
    ) -> None:
        self.hp = hp
        self.weights = weights
        self.layout = NativeLayout(model, hp, weights)
        embd = model.tensors["token_embd.weight"]
        self._embd_f16 = (
            model.raw("token_embd.weight").view("<f2") if embd.ggml_type is GGMLType.F16 else None
        )
        self.opts = _ffi.new(
            "ds4_fw_opts *",
            {
                "impl": impl_code,
                "kv_rounding": int(numerics.kv_rounding),
                "indexer_qat": int(numerics.indexer_qat),
                "iterated_rope": int(numerics.iterated_rope),
            },
        )
        self._cstates = _ffi.new("ds4_fw_state[]", hp.n_layer)
        self._failed = _ffi.new("int *")
        self._one_streams = np.empty((1, hp.n_hc, hp.n_embd), dtype=np.float32)
        self._one_id = np.zeros(1, dtype=np.int32)
        self._one_ptrs = (
            _fptr(self._one_streams),
            _ffi.cast("int32_t *", _ffi.from_buffer(self._one_id)),
        )
        self._bound: list[tuple[LayerState, int] | None] = [None] * hp.n_layer
        # per layer: (state, its version, end position) after the last native call, and
        # the GrowRows whose counts a call advances
        self._clean: list[tuple[LayerState, int, int] | None] = [None] * hp.n_layer
        self._advance: list[tuple[list[Any], list[tuple[Any, Any]]]] = [([], [])] * hp.n_layer
        self.native_seconds = 0.0

    def _bind_comp(self, dst: Any, comp: CompressorHistory, room: int) -> None:
        dst.kv = _fptr(comp.kv.reserve(room))
        dst.score = _fptr(comp.score.reserve(room))
        cap = room // comp.ratio + 1
        dst.rows = _fptr(comp.rows.reserve(cap))
        dst.rows_cap = cap

    def _bind(self, il: int, state: LayerState, start: int, end: int) -> None:
        """Point layer il's C state at the arrays of `state`, with room up to `end`.

        Pointers stay valid until an array is reallocated, which only a bind does
        (rewinds truncate and trims shift rows in place, restores make new
        LayerStates): a decode step whose state and room are unchanged only refreshes
        the row counts and history bases.
        """
        if state.raw.n != start:
            raise Ds4Error(f"layer {il} holds {state.raw.n} positions, expected {start}")
        c = self._cstates[il]
        bound = self._bound[il]
        if bound is None or bound[0] is not state or end > bound[1]:
            room = end + max(64, end - state.raw.base)  # amortised: rare rebinds in decode
            c.raw = _fptr(state.raw.reserve(room))
            c.attn.kv = c.attn.score = c.attn.rows = c.index.kv = c.index.score = _ffi.NULL
            c.index.rows = _ffi.NULL
            if state.attn is not None:
                self._bind_comp(c.attn, state.attn, room)
            if state.index is not None:
                self._bind_comp(c.index, state.index, room)
            self._bound[il] = (state, room)
        c.raw_base = state.raw.base  # trims move rows down inside the same array
        for comp, cc in ((state.attn, c.attn), (state.index, c.index)):
            if comp is not None:
                cc.n_rows, cc.base = comp.rows.n, comp.kv.base
                if comp.score.base != comp.kv.base:
                    raise Ds4Error(f"layer {il}: compressor kv and score histories disagree")

    def _plan_commit(self, il: int, state: LayerState) -> None:
        c = self._cstates[il]
        grows: list[Any] = [state.raw]
        counted: list[tuple[Any, Any]] = []
        for comp, cc in ((state.attn, c.attn), (state.index, c.index)):
            if comp is not None:
                grows += [comp.kv, comp.score]
                counted.append((comp.rows, cc))
        self._advance[il] = (grows, counted)

    def _commit(self, il: int, state: LayerState, end: int) -> None:
        grows, counted = self._advance[il]
        for g in grows:
            g.n = end
        for rows, cc in counted:
            rows.n = int(cc.n_rows)
        self._clean[il] = (state, state.version, end)

    def run(self, tokens: I64, positions: I64, states: list[LayerState]) -> F32:
        """Evaluate positions[0].. (consecutive, as sessions give them) into the states;
        return the streams (n, S, D) (for one token, a buffer the next call reuses)."""
        hp, n = self.hp, int(tokens.size)
        start = int(positions[0]) if n else 0
        if n == 1:  # decode: reused buffers and pointers (valid until the next call)
            streams, ids = self._one_streams, self._one_id
            sp, tp = self._one_ptrs
            ids[0] = tokens[0]
        else:
            streams = np.empty((n, hp.n_hc, hp.n_embd), dtype=np.float32)
            ids = tokens.astype(np.int32)
            sp, tp = _fptr(streams), _ffi.cast("int32_t *", _ffi.from_buffer(ids))
        if self._embd_f16 is not None:  # the usual F16 table: convert while broadcasting
            streams[:] = self._embd_f16[tokens][:, None, :]
        else:
            streams[:] = self.weights.rows("token_embd.weight", tokens)[:, None, :]
        end = start + n
        for il, state in enumerate(states):
            clean = self._clean[il]
            bound = self._bound[il]
            # unchanged since the last call, which left the C state right for this one
            if (
                clean is not None
                and clean[0] is state
                and clean[1] == state.version
                and clean[2] == start
                and bound is not None
                and end <= bound[1]
            ):
                continue
            self._bind(il, state, start, end)
            self._plan_commit(il, state)
        t0 = time.perf_counter()
        rc = _lib.ds4_fw_layers_forward(
            self.layout.layers, self._cstates, hp.n_layer, sp, tp, start, n, self.opts,
            self._failed,
        )  # fmt: skip
        self.native_seconds += time.perf_counter() - t0
        if rc:
            for state in states:
                state.truncate(start)  # (a new version: the next call rebinds)
            il = int(self._failed[0])
            raise Ds4Error(f"layer {il}: {_ERRORS.get(rc, f'native error {rc}')}")
        for il, state in enumerate(states):
            self._commit(il, state, end)
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
