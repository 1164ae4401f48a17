"""The numpy forward pass of DeepSeek V4, written for clarity: weight products, the
attention and FFN sublayers, and the whole-model chunk forward (docs/reference/model.md §3.1–3.11).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.state import CompressorHistory, LayerState
from ds4.adapters.gguf.model_files import TensorValues
from ds4.domain.engine_math.layers import (
    HcMix,
    RopeParams,
    Yarn,
    apply_rope,
    attend_with_sinks,
    clamped_swiglu,
    f16round,
    hc_post,
    hc_split,
    head_weights,
    indexer_scores,
    pool,
    rmsnorm,
    rope_angles,
    route,
    top_k_mask,
    weighted_streams,
    window_candidates,
)
from ds4.domain.engine_math.lowprec import Numerics, fp8_kv_sim, indexer_qat
from ds4.domain.engine_math.quant_dots import (
    QuantizedActivation,
    dot_iq2_xs,
    dot_iq2_xxs,
    dot_iq3_s,
    dot_iq3_xxs,
    dot_iq4_nl,
    dot_iq4_xs,
    dot_mxfp4,
    dot_q2_k,
    dot_q3_k,
    dot_q4_k,
    dot_q5_k,
    dot_q6_k,
    dot_q8_0,
    quantize_q8_0,
    quantize_q8_k,
)
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.quant_formats import DEQUANTIZABLE
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.steering.directions import Steering, steer_rows
from ds4.ports.model_file import Dequantizer, ModelFile

# --- Weights --------------------------------------------------------------------------
# Weights read from the memory-mapped model file on every use.
#
# Matrices are dequantized (or decoded to integer codes) per call and dropped afterwards;
# only small per-layer vectors (norms, HC scale/base, sinks, biases, ape) are kept.
# With activation quantization on, quantized weights go through the integer dot products
# of docs/reference/formats.md §5 instead of a float matmul.

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

_Q8_0_DOTS: dict[GGMLType, Callable[[U8, QuantizedActivation], F32]] = {
    GGMLType.Q8_0: dot_q8_0,
    GGMLType.MXFP4: dot_mxfp4,
    GGMLType.IQ4_NL: dot_iq4_nl,
}
_KQUANT_DOTS: dict[GGMLType, Callable[[U8, QuantizedActivation], F32]] = {
    GGMLType.Q2_K: dot_q2_k,
    GGMLType.Q4_K: dot_q4_k,
    GGMLType.IQ2_XXS: dot_iq2_xxs,
    GGMLType.Q3_K: dot_q3_k,
    GGMLType.Q5_K: dot_q5_k,
    GGMLType.Q6_K: dot_q6_k,
    GGMLType.IQ4_XS: dot_iq4_xs,
    GGMLType.IQ2_XS: dot_iq2_xs,
    GGMLType.IQ3_XXS: dot_iq3_xxs,
    GGMLType.IQ3_S: dot_iq3_s,
}


class WeightStore(TensorValues):
    """The lookups of TensorValues plus the reference engine's weight products."""

    def __init__(self, model: ModelFile, dequantizer: Dequantizer, numerics: Numerics) -> None:
        super().__init__(model, dequantizer)
        self._numerics = numerics

    def matmul(
        self, name: str, x: F32, *, rows: slice | None = None, expert: int | None = None
    ) -> F32:
        """y[t] = W x[t] for each row t of x (n, in) -> (n, out).

        rows picks a range of output rows; expert picks one matrix of a 3-D expert tensor.
        Each token is its own matvec, so prefill, chunks and decode give identical bits.
        """
        info = self._model.tensors[name]
        raw = self._model.raw(name)
        if expert is not None:
            raw = raw[expert]
        if rows is not None:
            raw = raw[rows]
        x = np.asarray(x, dtype=np.float32)
        kind = info.ggml_type
        if self._numerics.activation_quant and kind in _Q8_0_DOTS:
            per32 = _Q8_0_DOTS[kind]
            return np.stack([per32(raw, quantize_q8_0(xt)) for xt in x]).reshape(x.shape[0], -1)
        if self._numerics.activation_quant and kind in _KQUANT_DOTS:
            dot = _KQUANT_DOTS[kind]
            return np.stack([dot(raw, quantize_q8_k(xt)) for xt in x]).reshape(x.shape[0], -1)
        if kind not in DEQUANTIZABLE:
            raise Ds4Error(
                f"{name}: weight type {kind.name} is not supported by the reference engine"
            )
        w = self._deq.dequantize(raw, kind)
        if self._numerics.activation_quant and kind is GGMLType.F32:
            # F32 2-D weights accumulate in f64 (docs/reference/model.md §4.1)
            w64 = w.astype(np.float64)
            out64 = [w64 @ xt.astype(np.float64) for xt in x]
            return np.stack(out64).astype(np.float32).reshape(x.shape[0], -1)
        if self._numerics.activation_quant:  # F16/BF16: f32 products summed in index order
            return _sequential_f32(w, x)
        return np.stack([w @ xt for xt in x]).astype(np.float32).reshape(x.shape[0], -1)


def _sequential_f32(w: F32, x: F32) -> F32:
    """y[t, r] = (((0 + w[r,0]x[t,0]) + w[r,1]x[t,1]) + ...) with every product and sum
    rounded to f32: docs/reference/model.md §4.1's f32 accumulation in a fixed order (the native
    scalar kernel's), instead of BLAS's blocking."""
    acc = np.zeros((x.shape[0], w.shape[0]), dtype=np.float32)
    for i in range(w.shape[1]):
        acc += np.multiply.outer(x[:, i], w[:, i])
    return acc


# --- The attention sublayer -----------------------------------------------------------
# The attention sublayer of one layer over a chunk of tokens (docs/reference/model.md §3.3–3.7).
#
# Projections are per token and stateless, so they run for the whole chunk at once; the
# cache pushes, compressor emissions, indexer top-k and attention then run token by token
# in position order, so every token sees exactly the state decode would give it.

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


# --- The FFN sublayer -----------------------------------------------------------------
# The FFN sublayer: routed MoE (hash or biased top-k) plus the shared expert
# (docs/reference/model.md §3.8–3.9).


def ffn_sublayer(setup: LayerSetup, g: F32, tokens: I64) -> F32:
    """g (n, D): the ffn-normed input; tokens (n,) ids (hash routing). Returns (n, D)."""
    ids, wts = route_tokens(setup, g, tokens)
    out: F32 = (routed_experts(setup, g, ids, wts) + shared_expert(setup, g)).astype(np.float32)
    return out


def route_tokens(setup: LayerSetup, g: F32, tokens: I64) -> tuple[I64, F32]:
    """Chosen expert ids and weights, (n, k) each, for the ffn-normed input g."""
    return route_logits(setup, setup.mm("ffn_gate_inp.weight", g), tokens)


def route_logits(setup: LayerSetup, logits: F32, tokens: I64) -> tuple[I64, F32]:
    """Expert ids and weights (n, k) from the router logits (n, n_expert)."""
    hp, pre, w = setup.hp, setup.prefix, setup.weights
    n = logits.shape[0]
    bias = w.small(pre + "exp_probs_b.bias") if w.has(pre + "exp_probs_b.bias") else None
    hashed = w.int_rows(pre + "ffn_gate_tid2eid.weight", tokens) if setup.is_hash else None
    ids = np.empty((n, hp.n_expert_used), dtype=np.int64)
    wts = np.empty((n, hp.n_expert_used), dtype=np.float32)
    for t in range(n):
        ids[t], wts[t] = route(
            logits[t],
            None if hashed is not None else bias,
            hashed[t] if hashed is not None else None,
            hp.n_expert_used,
            hp.expert_weights_scale,
            hp.expert_weights_norm,
        )
    return ids, wts


def routed_experts(setup: LayerSetup, g: F32, ids: I64, wts: F32) -> F32:
    """The routed-expert sum (n, D): one pass per used expert over the tokens that chose
    it, then a per-token sum in slot order."""
    hp, pre, w = setup.hp, setup.prefix, setup.weights
    n = g.shape[0]
    clamp = setup.clamp
    contrib = np.zeros((n, hp.n_expert_used, hp.n_embd), dtype=np.float32)
    for e in np.unique(ids):
        tok, slot = np.nonzero(ids == e)
        x = g[tok]
        gate = w.matmul(pre + "ffn_gate_exps.weight", x, expert=int(e))
        up = w.matmul(pre + "ffn_up_exps.weight", x, expert=int(e))
        mid = (clamped_swiglu(gate, up, clamp) * wts[tok, slot][:, None]).astype(np.float32)
        contrib[tok, slot] = w.matmul(pre + "ffn_down_exps.weight", mid, expert=int(e))
    moe = np.zeros((n, hp.n_embd), dtype=np.float32)
    for s in range(hp.n_expert_used):
        moe = (moe + contrib[:, s]).astype(np.float32)
    return moe


def shared_expert(setup: LayerSetup, g: F32) -> F32:
    clamp = setup.clamp
    shared_mid = clamped_swiglu(
        setup.mm("ffn_gate_shexp.weight", g), setup.mm("ffn_up_shexp.weight", g), clamp
    )
    return setup.mm("ffn_down_shexp.weight", shared_mid)


# --- The whole model ------------------------------------------------------------------
# Whole-model forward of a chunk of tokens: embedding, layers (layer-major), head
# (docs/reference/model.md §3.1–3.11).


class Forward:
    def __init__(self, hp: DeepSeekV4HParams, weights: WeightStore, numerics: Numerics) -> None:
        self.hp = hp
        self.weights = weights
        self.setups = [LayerSetup(hp, il, weights, numerics) for il in range(hp.n_layer)]
        # directional steering and activation capture (docs/steering.md), main layers only
        self.steering: Steering | None = None
        self.capture_component: str | None = None
        self.captured = np.zeros((hp.n_layer, hp.n_embd), np.float32)

    def _hc_pre(self, setup: LayerSetup, streams: F32, kind: str) -> tuple[F32, HcMix]:
        hp = self.hp
        flat = rmsnorm(streams.reshape(streams.shape[0], -1), None, hp.rms_eps)
        mix = setup.mm(f"hc_{kind}_fn.weight", flat)
        scale, base = setup.vec(f"hc_{kind}_scale.weight"), setup.vec(f"hc_{kind}_base.weight")
        split = hc_split(mix, scale, base, hp.n_hc, hp.sinkhorn_iters, hp.hc_eps)
        return weighted_streams(streams, split.pre), split

    def layer(self, il: int, streams: F32, tokens: I64, positions: I64, state: LayerState) -> F32:
        return self.layer_with(self.setups[il], streams, tokens, positions, state, il)

    def layer_with(
        self,
        setup: LayerSetup,
        streams: F32,
        tokens: I64,
        positions: I64,
        state: LayerState,
        main_layer: int | None = None,
    ) -> F32:
        """One block (HC pre, attention, HC post, HC pre, FFN, HC post) as `setup` names it;
        `main_layer`: its index among the main layers (steering and capture apply)."""
        eps = self.hp.rms_eps
        x_in, mix = self._hc_pre(setup, streams, "attn")
        h = rmsnorm(x_in, setup.vec("attn_norm.weight"), eps)
        a = self._sublayer_out(attention_sublayer(setup, h, positions, state), main_layer, "attn")
        streams = hc_post(a, streams, mix)
        f_in, mix = self._hc_pre(setup, streams, "ffn")
        g = rmsnorm(f_in, setup.vec("ffn_norm.weight"), eps)
        y = self._sublayer_out(self.ffn(setup, g, tokens), main_layer, "ffn")
        return hc_post(y, streams, mix)

    def _sublayer_out(self, y: F32, layer: int | None, kind: str) -> F32:
        """Steering, then capture, of a sublayer output before HC post."""
        if layer is None:
            return y
        s = self.steering
        scale = 0.0 if s is None else (s.attn if kind == "attn" else s.ffn)
        if s is not None and scale != 0.0:
            y = steer_rows(y, s.directions[layer], scale)
        if self.capture_component == kind + "_out":
            self.captured[layer] = y[-1]
        return y

    def ffn(self, setup: LayerSetup, g: F32, tokens: I64) -> F32:
        """The FFN sublayer (a hook: other backends route experts their own way)."""
        return ffn_sublayer(setup, g, tokens)

    def run(self, tokens: I64, positions: I64, states: list[LayerState]) -> F32:
        """Evaluate the chunk into the states; return the final HC streams (n, S, D)."""
        e = self.weights.rows("token_embd.weight", tokens)
        streams = np.repeat(e[:, None, :], self.hp.n_hc, axis=1).astype(np.float32)
        for il in range(self.hp.n_layer):
            streams = self.layer(il, streams, tokens, positions, states[il])
        return streams

    def head(self, streams: F32) -> F32:
        """Logits (n, V) from final HC streams (n, S, D)."""
        return self.head_with(streams, self.weights, "output_hc_", "output_norm.weight")

    def head_with(self, streams: F32, store: WeightStore, hc: str, norm: str) -> F32:
        """The output head with the HC head `hc`{fn,scale,base}.weight and norm `norm`
        from `store` (the MTP block has its own), always this model's output matrix."""
        hp = self.hp
        flat = rmsnorm(streams.reshape(streams.shape[0], -1), None, hp.rms_eps)
        mix = store.matmul(hc + "fn.weight", flat)
        wts = head_weights(
            mix, store.small(hc + "scale.weight"), store.small(hc + "base.weight"), hp.hc_eps
        )
        z = rmsnorm(weighted_streams(streams, wts), store.small(norm), hp.rms_eps)
        return self.weights.matmul("output.weight", z)
