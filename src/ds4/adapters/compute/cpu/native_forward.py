"""The model on the native side: its layout, numerics options, embedding table and the
passes that are not one sequence's own (several sequences in one pass, a worker's layer
range, the output head of a batch, benchmarks' timed layer passes).

A step is two native calls: ds4_fw_seq_forward runs every layer over a C-owned sequence
state (ds4_seq.h), ds4_fw_head_forward the output head. One sequence's step makes them
from CpuState (sequence_state.py), so a decode token goes from the session to the
state to native code; Python only looks up the embedding rows and hands pointers over."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.adapters.compute.cpu.native_layout import NativeLayout
from ds4.adapters.gguf.model_files import TensorValues
from ds4.domain.engine_math.lowprec import Numerics
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


U16 = npt.NDArray[np.uint16]


def _bf16_rows(bits: U16) -> F32:
    out: F32 = (bits.astype(np.uint32) << 16).view(np.float32)
    return out


def _f16_rows(bits: U16) -> F32:
    out: F32 = bits.view("<f2").astype(np.float32)
    return out


# Embedding tables read straight from the mapped file: type -> bits (n, D) to f32 rows.
_HALF_EMBEDDINGS: dict[GGMLType, Callable[[U16], F32]] = {
    GGMLType.F16: _f16_rows,
    GGMLType.BF16: _bf16_rows,
}


def fptr(arr: F32) -> Any:
    return _ffi.cast("float *", _ffi.from_buffer(arr))


def error_text(rc: int) -> str:
    return _ERRORS.get(rc, f"native error {rc}")


class NativeForward:
    """The model's native layout plus the calls that evaluate it.

    numerics: which rounding points to simulate (quantized weights always take the
    integer dots); impl_code: the kernel set (1 = scalar: with ds4 numerics,
    docs/reference/model.md §4.5's strict arithmetic bit for bit).
    `native_seconds` accumulates the time spent inside native calls, so a benchmark can
    report Python's share of a decode step.
    """

    def __init__(
        self,
        hp: DeepSeekV4HParams,
        model: ModelFile,
        values: TensorValues,
        numerics: Numerics,
        impl_code: int,
        *,
        layers: range | None = None,
        head: bool = True,
    ) -> None:
        """`layers`/`head`: lay out only these layers and/or the head (NativeLayout);
        sequences then hold those layers' state only."""
        self.hp = hp
        self.values = values
        self.layout = NativeLayout(model, hp, values, layers=layers, head=head)
        self.layer_range = self.layout.layer_range
        embd = model.tensors.get("token_embd.weight")  # absent from a later layer shard
        self._embd_half = (  # F16 / BF16 tables: rows widened here (exact), no codec call
            (model.raw("token_embd.weight").view("<u2"), embd.ggml_type)
            if embd is not None and embd.ggml_type in _HALF_EMBEDDINGS
            else None
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
        self.failed = _ffi.new("int *")  # the failing layer of a pass
        self._one_streams = np.empty((1, hp.n_hc, hp.n_embd), dtype=np.float32)
        self._one_id = np.zeros(1, dtype=np.int32)
        self._one_ptrs = (
            fptr(self._one_streams),
            _ffi.cast("int32_t *", _ffi.from_buffer(self._one_id)),
        )
        self.native_seconds = 0.0

    def embed_rows(self, tokens: I64) -> F32:
        """The embedding rows (n, D) of tokens, as f32 (the MTP block's input)."""
        if self._embd_half is not None:
            bits, kind = self._embd_half
            return _HALF_EMBEDDINGS[kind](bits[tokens])
        return np.asarray(self.values.rows("token_embd.weight", tokens), dtype=np.float32)

    def new_seq(self) -> Any:
        """An empty C sequence state, freed when the last reference goes."""
        seq = _lib.ds4_fw_seq_new(self.layout.layers, len(self.layer_range))
        if seq == _ffi.NULL:
            raise Ds4Error("out of memory for a new sequence state")
        return _ffi.gc(seq, _lib.ds4_fw_seq_free)

    def inputs(self, tokens: I64) -> tuple[F32, npt.NDArray[np.int32], Any, Any]:
        """The embedded streams (n, S, D) of a pass over tokens, the int32 ids, and the
        pointers to both (valid while the caller holds the arrays); for one token,
        buffers the next one-token pass reuses."""
        hp, n = self.hp, int(tokens.size)
        if n == 1:  # decode: reused buffers and pointers (valid until the next call)
            streams, ids = self._one_streams, self._one_id
            sp, tp = self._one_ptrs
            ids[0] = tokens[0]
        else:
            streams = np.empty((n, hp.n_hc, hp.n_embd), dtype=np.float32)
            ids = tokens.astype(np.int32)
            sp, tp = fptr(streams), _ffi.cast("int32_t *", _ffi.from_buffer(ids))
        self.embed(tokens, streams)
        return streams, ids, sp, tp

    def run(self, seq: Any, tokens: I64) -> F32:
        """Evaluate tokens at the sequence's next positions; return the streams (n, S, D)
        (for one token, a buffer the next call reuses). On failure the state is as it
        was. (CpuState makes this call itself; benchmarks time it alone.)"""
        streams, ids, sp, tp = self.inputs(tokens)
        t0 = time.perf_counter()
        rc = _lib.ds4_fw_seq_forward(
            seq, self.layout.layers, sp, tp, int(tokens.size), self.opts, self.failed
        )
        self.native_seconds += time.perf_counter() - t0
        self.check(rc)
        del ids  # held through the call: tp points into it
        return streams

    def embed(self, tokens: I64, streams: F32) -> None:
        """Fill streams (n, S, D) with each token's embedding row on every stream."""
        if self._embd_half is not None and self._embd_half[1] is GGMLType.F16:
            streams[:] = self._embd_half[0][tokens].view("<f2")[:, None, :]  # the usual table
        elif self._embd_half is not None:
            streams[:] = self.embed_rows(tokens)[:, None, :]
        else:
            streams[:] = self.values.rows("token_embd.weight", tokens)[:, None, :]

    def check(self, rc: int) -> None:
        """Ds4Error naming the failed layer unless a layer pass returned 0."""
        if rc:
            layer = self.layer_range.start + int(self.failed[0])
            raise Ds4Error(f"layer {layer}: {error_text(rc)}")

    def run_many(self, seqs: list[Any], tokens: list[I64]) -> list[F32]:
        """Evaluate tokens[i] into seqs[i] for every i in one native pass (weights read
        once for all rows); the logits after each sequence's last token, (1, V) each.
        On failure no sequence changes."""
        counts = [int(t.size) for t in tokens]
        ids = np.concatenate(tokens).astype(np.int32)
        streams = np.empty((ids.size, self.hp.n_hc, self.hp.n_embd), dtype=np.float32)
        self.embed(ids.astype(np.int64), streams)
        self.run_rows(seqs, counts, streams, ids)
        last_rows = np.cumsum(counts) - 1
        logits = self.head(streams[last_rows])
        return [logits[i : i + 1] for i in range(len(seqs))]

    def run_rows(
        self, seqs: list[Any], counts: list[int], streams: F32, ids: npt.NDArray[np.int32]
    ) -> None:
        """This layout's layers over given streams (rows of seqs[0], then seqs[1], ...),
        in place; the sequences advance by counts[i]. On failure no sequence changes."""
        n = sum(counts)
        fits = streams.shape == (n, self.hp.n_hc, self.hp.n_embd) and ids.shape == (n,)
        if (
            not fits
            or streams.dtype != np.float32
            or not streams.flags.c_contiguous
            or (not streams.flags.writeable)
        ):
            raise Ds4Error(
                f"streams {streams.dtype} {streams.shape} and ids {ids.shape} must be "
                f"{n} writable contiguous float32 rows and their token ids"
            )
        ids = np.ascontiguousarray(ids, dtype=np.int32)
        c_seqs = _ffi.new("ds4_fw_seq *[]", seqs)
        c_counts = _ffi.new("size_t[]", counts)
        t0 = time.perf_counter()
        rc = _lib.ds4_fw_seqs_forward(
            c_seqs, c_counts, len(seqs), self.layout.layers, fptr(streams),
            _ffi.cast("int32_t *", _ffi.from_buffer(ids)), self.opts, self.failed,
        )  # fmt: skip
        self.native_seconds += time.perf_counter() - t0
        self.check(rc)

    def head(self, streams: F32) -> F32:
        """Logits (n, V) from final streams (n, S, D)."""
        if self.layout.head == _ffi.NULL:
            raise Ds4Error("this layout has no output head")
        s = np.ascontiguousarray(streams, dtype=np.float32)
        out = np.empty((s.shape[0], int(self.layout.head.output.rows)), dtype=np.float32)
        t0 = time.perf_counter()
        rc = _lib.ds4_fw_head_forward(self.layout.head, fptr(s), s.shape[0], fptr(out), self.opts)
        self.native_seconds += time.perf_counter() - t0
        if rc:
            raise Ds4Error(f"output head: {error_text(rc)}")
        return out
