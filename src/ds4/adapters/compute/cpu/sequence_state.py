"""CpuState: the SequenceState port on a C-owned sequence state (native/cpu/ds4_seq.h).

The arrays live in memory the native side allocates and grows; Python holds one opaque
pointer. Snapshots copy rows out through read views and back in with set_rows, in the
shared DSV4 layout (domain/engine/dsv4_payload.py), so payloads move freely between
this backend and the reference one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.adapters.compute.cpu.native_forward import NativeForward, error_text, fptr
from ds4.domain.engine.compressor_frontier import frontier_from_inputs, inputs_from_frontier
from ds4.domain.engine.dsv4_payload import (
    CompressorSnapshot,
    LayerSnapshot,
    SessionSnapshot,
    layer_compressors,
    raw_window,
)
from ds4.domain.errors import Ds4Error
from ds4.ports.compute import SequenceState

F32 = npt.NDArray[np.float32]

_ffi = _native_cpu.ffi
_lib = _native_cpu.lib
# (kv, score, rows) arrays of the attention and the indexer compressor
_ATTN = (_lib.DS4_SEQ_ATTN_KV, _lib.DS4_SEQ_ATTN_SCORE, _lib.DS4_SEQ_ATTN_ROWS)
_INDEX = (_lib.DS4_SEQ_INDEX_KV, _lib.DS4_SEQ_INDEX_SCORE, _lib.DS4_SEQ_INDEX_ROWS)


class CpuState:
    def __init__(self, forward: NativeForward, ctx: int, seq: Any = None) -> None:
        self._fwd = forward
        self._hp = forward.hp
        self._ctx = ctx
        self._seq = seq if seq is not None else forward.new_seq()
        self._out = (_ffi.new("int64_t *"), _ffi.new("int64_t *"), _ffi.new("size_t *"))

    @property
    def seq(self) -> Any:
        """The C sequence state (for a batched pass over several sequences)."""
        return self._seq

    @property
    def n_layer(self) -> int:
        """Layers this state holds (the forward's range: all of them, or a worker's)."""
        return len(self._fwd.layer_range)

    @property
    def length(self) -> int:
        return int(_lib.ds4_fw_seq_len(self._seq))

    def forward(self, tokens: npt.NDArray[np.int64], all_logits: bool) -> F32:
        return self.forward_streams(tokens, all_logits, 0)[0]

    def forward_streams(
        self, tokens: npt.NDArray[np.int64], all_logits: bool, keep: int
    ) -> tuple[F32, F32]:
        # the step's two native calls, made here: every layer over this sequence, the head
        fwd, n, head = self._fwd, int(tokens.size), self._fwd.layout.head
        if head == _ffi.NULL:
            raise Ds4Error("this layout has no output head")
        start = self.length
        streams, ids, sp, tp = fwd.inputs(tokens)
        t0 = time.perf_counter()
        rc = _lib.ds4_fw_seq_forward(self._seq, fwd.layout.layers, sp, tp, n, fwd.opts, fwd.failed)
        fwd.native_seconds += time.perf_counter() - t0
        fwd.check(rc)  # on failure the state is as it was
        del ids  # held through the call: tp points into it
        try:
            rows = streams if all_logits else streams[-1:]  # C-contiguous either way
            logits = np.empty((rows.shape[0], int(head.output.rows)), dtype=np.float32)
            t0 = time.perf_counter()
            rc = _lib.ds4_fw_head_forward(head, fptr(rows), rows.shape[0], fptr(logits), fwd.opts)
            fwd.native_seconds += time.perf_counter() - t0
            if rc:
                raise Ds4Error(f"output head: {error_text(rc)}")
        except BaseException:
            _lib.ds4_fw_seq_truncate(self._seq, start)
            raise
        # streams: a view (of a buffer the next one-token call reuses): the caller copies it
        return logits, streams[streams.shape[0] - min(keep, streams.shape[0]) :]

    def truncate(self, n: int) -> None:
        _lib.ds4_fw_seq_truncate(self._seq, n)

    def trim(self, keep_from: int) -> None:
        _lib.ds4_fw_seq_trim(self._seq, keep_from)

    def history_ok(self, m: int) -> bool:
        return bool(_lib.ds4_fw_seq_history_ok(self._seq, m))

    # ---- snapshots ---------------------------------------------------------

    def kept_rows(self, il: int, which: int) -> tuple[F32, int]:
        """A read-only view of one array's kept rows and the position of its first row."""
        base, n, width = self._out
        ptr = _lib.ds4_fw_seq_rows(self._seq, il, which, base, n, width)
        count, w = int(n[0] - base[0]), int(width[0])
        if ptr == _ffi.NULL or count == 0:
            return np.zeros((0, max(w, 1)), np.float32), int(base[0])
        buf = _ffi.buffer(ptr, count * w * 4)
        return np.frombuffer(buf, dtype=np.float32).reshape(count, w), int(base[0])

    def _span(self, il: int, which: int) -> Any:
        rows, base = self.kept_rows(il, which)

        def span(start: int, end: int) -> F32:
            if start < base or end - base > rows.shape[0]:
                layer = self._fwd.layer_range[il]
                raise Ds4Error(f"layer {layer}: rows {start}..{end} are no longer kept")
            return rows[start - base : end - base]

        return span

    def _comp(self, il: int, ratio: int, arrays: tuple[int, int, int]) -> CompressorSnapshot | None:
        if not ratio:
            return None
        kv_id, score_id, rows_id = arrays
        t = self.length
        width = int(self.kept_rows(il, kv_id)[0].shape[1])
        s_kv, s_sc = frontier_from_inputs(
            ratio, width, t, self._span(il, kv_id), self._span(il, score_id)
        )
        return CompressorSnapshot(self.kept_rows(il, rows_id)[0].copy(), s_kv, s_sc)

    def snapshot(self, tokens: Sequence[int], logits: F32) -> SessionSnapshot:
        t = self.length
        if len(tokens) != t:
            raise Ds4Error(f"the state holds {t} positions, not {len(tokens)}")
        r = min(t, raw_window(self._hp, self._ctx))
        layers = []
        for il, model_layer in enumerate(self._fwd.layer_range):
            attn_ratio, index_ratio = layer_compressors(self._hp, model_layer)
            raw = self._span(il, _lib.DS4_SEQ_RAW)(t - r, t).copy()
            layers.append(
                LayerSnapshot(raw, self._comp(il, attn_ratio, _ATTN),
                              self._comp(il, index_ratio, _INDEX))
            )  # fmt: skip
        return SessionSnapshot(list(tokens), logits, layers)

    def _set(self, il: int, which: int, start: int, rows: F32) -> None:
        data = np.ascontiguousarray(rows, dtype=np.float32)
        ptr = _ffi.cast("const float *", _ffi.from_buffer(data)) if data.size else _ffi.NULL
        rc = _lib.ds4_fw_seq_set_rows(self._seq, il, which, start, ptr, data.shape[0])
        if rc:
            raise Ds4Error(f"snapshot layer {self._fwd.layer_range[il]}: {error_text(rc)}")

    def restore(self, snapshot: SessionSnapshot) -> None:
        t = len(snapshot.tokens)
        if len(snapshot.layers) != self.n_layer:
            raise Ds4Error(f"snapshot has {len(snapshot.layers)} layers, the state {self.n_layer}")
        seq = self._fwd.new_seq()
        self._seq, previous = seq, self._seq
        try:
            for il, lay in enumerate(snapshot.layers):
                self._set(il, _lib.DS4_SEQ_RAW, t - lay.raw.shape[0], lay.raw)
                for part, (kv_id, score_id, rows_id), ratio in zip(
                    (lay.attn, lay.index),
                    (_ATTN, _INDEX),
                    layer_compressors(self._hp, self._fwd.layer_range[il]),
                    strict=True,
                ):
                    if part is None:
                        continue
                    self._set(il, rows_id, 0, part.rows)
                    start, kv, sc = inputs_from_frontier(
                        ratio, t, part.frontier_kv, part.frontier_score
                    )
                    self._set(il, kv_id, start, kv)
                    self._set(il, score_id, start, sc)
        except BaseException:
            self._seq = previous
            raise
        _lib.ds4_fw_seq_set_len(seq, t)

    def clone(self) -> SequenceState:
        copy = _lib.ds4_fw_seq_clone(self._seq)
        if copy == _ffi.NULL:
            raise Ds4Error("out of memory for a copy of the sequence state")
        return CpuState(self._fwd, self._ctx, _ffi.gc(copy, _lib.ds4_fw_seq_free))

    @property
    def nbytes(self) -> int:
        return int(_lib.ds4_fw_seq_bytes(self._seq))
