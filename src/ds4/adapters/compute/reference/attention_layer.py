"""The attention sublayer of one layer over a chunk of tokens (docs/reference/model.md §3.3–3.7).

Projections are per token and stateless, so they run for the whole chunk at once; the
cache pushes, compressor emissions, indexer top-k and attention then run token by token
in position order, so every token sees exactly the state decode would give it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.kv_state import CompressorHistory, LayerState
from ds4.adapters.compute.reference.weights import WeightStore
from ds4.domain.engine_math.layers import (
    RopeParams,
    Yarn,
    apply_rope,
    attend_with_sinks,
    f16round,
    indexer_scores,
    pool,
    rmsnorm,
    rope_angles,
    top_k_mask,
    window_candidates,
)
from ds4.domain.engine_math.lowprec import Numerics, fp8_kv_sim, indexer_qat
from ds4.domain.model.hparams import DeepSeekV4HParams

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class LayerSetup:
    hp: DeepSeekV4HParams
    layer: int
    weights: WeightStore
    numerics: Numerics

    @property
    def prefix(self) -> str:
        return f"blk.{self.layer}."

    @property
    def ratio(self) -> int:
        return self.hp.compress_ratios[self.layer]

    @property
    def is_hash(self) -> bool:
        return self.hp.is_hash_layer(self.layer)

    @property
    def clamp(self) -> float:
        return self.hp.swiglu_clamp[self.layer]

    @property
    def window_from_kept(self) -> bool:
        """Attend to the kept raw rows only (the MTP block after a gap, docs/mtp.md)."""
        return False

    def rope(self) -> RopeParams:
        hp = self.hp
        if self.ratio == 0:
            return RopeParams(hp.n_rot, hp.rope_freq_base, None)
        yarn = Yarn(hp.rope_scaling_factor, hp.rope_orig_ctx, hp.yarn_beta_fast, hp.yarn_beta_slow)
        return RopeParams(hp.n_rot, hp.compress_rope_freq_base, yarn)

    def angles(self, positions: I64) -> F32:
        return rope_angles(positions, self.rope(), iterated=self.numerics.iterated_rope)

    def mm(self, suffix: str, x: F32, rows: slice | None = None) -> F32:
        return self.weights.matmul(self.prefix + suffix, x, rows=rows)

    def vec(self, suffix: str) -> F32:
        return self.weights.small(self.prefix + suffix)


def store_row(setup: LayerSetup, row: F32) -> F32:
    """Rounding of a KV row entering a cache: FP8 on the non-RoPE dims, then f16."""
    if not setup.numerics.kv_rounding:
        return row
    return f16round(fp8_kv_sim(row, setup.hp.head_dim - setup.hp.n_rot))


def _emit(setup: LayerSetup, comp: CompressorHistory, norm: str, last: int) -> None:
    """Pool the window ending at token `last` into one compressed row
    (docs/reference/model.md §3.4)."""
    lo = window_start(comp.ratio, last)
    kv, sc = comp.kv.span(lo, last + 1), comp.score.span(lo, last + 1)
    comp.rows.append(compressed_row(setup, kv, sc, comp.ratio, comp.row_width, norm, last))


def window_start(ratio: int, last: int) -> int:
    """First token of the window a compressor pools at token `last` (with the overlap)."""
    return max(0, last + 1 - ratio - (4 if ratio == 4 else 0))


def compressed_row(
    setup: LayerSetup, kv: F32, sc: F32, ratio: int, d: int, norm: str, last: int
) -> F32:
    """The row pooled from the inputs kv, sc of tokens window_start(ratio, last)..last."""
    lo = window_start(ratio, last)
    cand_kv, cand_sc = window_candidates(kv, sc, last - lo, ratio, d)
    row = rmsnorm(pool(cand_kv, cand_sc), setup.vec(norm), setup.hp.rms_eps)
    first = np.array([last + 1 - ratio], dtype=np.int64)
    row = apply_rope(row[None], setup.angles(first), setup.hp.n_rot)[0]
    if norm.startswith("attn_"):  # not by width: tiny shapes give both caches 128 dims
        return store_row(setup, row)
    if setup.numerics.indexer_qat:
        row = indexer_qat(row)
    if setup.numerics.kv_rounding:
        row = f16round(row)
    return row


def _compressor_inputs(
    setup: LayerSetup, h: F32, positions: I64, kind: str, ratio: int
) -> tuple[F32, F32]:
    kv = setup.mm(f"{kind}_kv.weight", h)
    ape = setup.vec(f"{kind}_ape.weight")
    score = (setup.mm(f"{kind}_gate.weight", h) + ape[positions % ratio]).astype(np.float32)
    return kv, score


def attention_sublayer(setup: LayerSetup, h: F32, positions: I64, state: LayerState) -> F32:
    """h (n, D): the attn-normed input. Returns the projected attention output (n, D)."""
    hp, eps = setup.hp, setup.hp.rms_eps
    n = h.shape[0]
    ang = setup.angles(positions)
    qrn = rmsnorm(setup.mm("attn_q_a.weight", h), setup.vec("attn_q_a_norm.weight"), eps)
    q = rmsnorm(setup.mm("attn_q_b.weight", qrn).reshape(n, hp.n_head, hp.head_dim), None, eps)
    q = apply_rope(q, ang[:, None, :], hp.n_rot)
    kv = rmsnorm(setup.mm("attn_kv.weight", h), setup.vec("attn_kv_a_norm.weight"), eps)
    kv = store_row(setup, apply_rope(kv, ang, hp.n_rot))

    attn_in = index_in = None
    if state.attn is not None:
        attn_in = _compressor_inputs(setup, h, positions, "attn_compressor", setup.ratio)
    iq = iw = None
    if state.index is not None:
        index_in = _compressor_inputs(setup, h, positions, "indexer_compressor", 4)
        iq = setup.mm("indexer.attn_q_b.weight", qrn)
        iq = apply_rope(
            iq.reshape(n, hp.n_indexer_head, hp.indexer_head_dim), ang[:, None, :], hp.n_rot
        )
        if setup.numerics.indexer_qat:
            iq = indexer_qat(iq)
        scale = np.float32(1.0 / math.sqrt(hp.indexer_head_dim * hp.n_indexer_head))
        iw = (setup.mm("indexer.proj.weight", h) * scale).astype(np.float32)

    sinks = setup.vec("attn_sinks.weight")
    heads = np.empty((n, hp.n_head, hp.head_dim), dtype=np.float32)
    for t in range(n):
        p = int(positions[t])
        state.raw.append(kv[t])
        for comp, inputs, norm in (
            (state.attn, attn_in, "attn_compressor_norm.weight"),
            (state.index, index_in, "indexer_compressor_norm.weight"),
        ):
            if comp is not None and inputs is not None:
                comp.kv.append(inputs[0][t])
                comp.score.append(inputs[1][t])
                if (p + 1) % comp.ratio == 0:
                    _emit(setup, comp, norm, p)
        first = max(0, p + 1 - hp.n_swa)
        if setup.window_from_kept:
            first = max(first, state.raw.base)
        rows = state.raw.span(first, p + 1)
        if state.attn is not None:
            comp_rows = state.attn.rows.view()
            index = state.index
            if (
                index is not None
                and iq is not None
                and iw is not None
                and len(comp_rows) > hp.indexer_top_k
            ):
                scores = indexer_scores(index.rows.view(), iq[t], iw[t])
                comp_rows = comp_rows[top_k_mask(scores, hp.indexer_top_k)]
            rows = np.concatenate([rows, comp_rows])
        heads[t] = attend_with_sinks(q[t], rows, sinks, 1.0 / math.sqrt(hp.head_dim))

    heads = apply_rope(heads, ang[:, None, :], hp.n_rot, inverse=True)
    flat = heads.reshape(n, hp.n_head * hp.head_dim)
    gin, lo = hp.group_in_dim, hp.o_lora_rank
    low = np.concatenate(
        [
            setup.mm(
                "attn_output_a.weight",
                flat[:, g * gin : (g + 1) * gin],
                rows=slice(g * lo, (g + 1) * lo),
            )
            for g in range(hp.n_out_group)
        ],
        axis=1,
    )
    return setup.mm("attn_output_b.weight", low)
