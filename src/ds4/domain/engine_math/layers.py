"""The per-layer math of the DeepSeek V4 forward pass (docs/reference/model.md §2, §3):
elementwise functions and RMSNorm at the prescribed precision, RoPE with the YaRN blend,
hyper-connections, attention with sinks and the indexer's top-k, compressor pooling, MoE
routing and the clamped SwiGLU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# --- rope ---
# RoPE on the last n_rot dims of each head, adjacent pairs, YaRN blend
# (docs/reference/model.md §2, §2.4).

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Yarn:
    factor: float
    orig_ctx: int
    beta_fast: float
    beta_slow: float


@dataclass(frozen=True)
class RopeParams:
    n_rot: int
    base: float
    yarn: Yarn | None  # None on dense (ratio-0) layers


def yarn_ramp(n_rot: int, base: float, yarn: Yarn) -> F32:
    """Per pair k: 1 = pure extrapolation (pos*ts^k), 0 = pure interpolation (/factor)."""

    def corr(beta: float) -> float:
        return n_rot * math.log(yarn.orig_ctx / (beta * 2 * math.pi)) / (2 * math.log(base))

    low = max(0.0, math.floor(corr(yarn.beta_fast)))
    high = min(n_rot - 1.0, math.ceil(corr(yarn.beta_slow)))
    k = np.arange(n_rot // 2, dtype=np.float32)
    span = np.float32(max(0.001, high - low))
    ramp: F32 = (np.float32(1) - np.clip((k - np.float32(low)) / span, 0, 1)).astype(np.float32)
    return ramp


def rope_angles(positions: npt.NDArray[np.int64], rp: RopeParams, *, iterated: bool) -> F32:
    """Angles (n_pos, n_rot/2) in f32.

    iterated=True is ds4's form: th_ex = pos, then th_ex *= ts after each pair, all f32,
    ts = powf(base, -2/n_rot). Otherwise the HF form: pos * inv_freq with
    inv_freq = 1 / base^(2k/n_rot) (also f32).
    """
    half = rp.n_rot // 2
    pos = np.asarray(positions, dtype=np.float32).reshape(-1)
    ramp = yarn_ramp(rp.n_rot, rp.base, rp.yarn) if rp.yarn is not None else None
    if iterated:
        ts = np.float32(math.pow(np.float32(rp.base), np.float32(-2.0 / rp.n_rot)))
        th_ex = pos.copy()
        extrap = np.empty((pos.size, half), dtype=np.float32)
        for k in range(half):
            extrap[:, k] = th_ex
            th_ex = (th_ex * ts).astype(np.float32)
    else:
        exps = (np.arange(0, rp.n_rot, 2, dtype=np.float32) / np.float32(rp.n_rot)).astype(
            np.float32
        )
        inv = (np.float32(1) / np.power(np.float32(rp.base), exps)).astype(np.float32)
        if ramp is not None:
            assert rp.yarn is not None
            interp = (inv / np.float32(rp.yarn.factor)).astype(np.float32)
            inv = (interp * (np.float32(1) - ramp) + inv * ramp).astype(np.float32)
        out: F32 = (pos[:, None] * inv[None, :]).astype(np.float32)
        return out
    if ramp is None:
        return extrap
    assert rp.yarn is not None
    interp = (extrap * np.float32(1.0 / rp.yarn.factor)).astype(np.float32)
    blended: F32 = (interp * (np.float32(1) - ramp) + extrap * ramp).astype(np.float32)
    return blended


def apply_rope(x: F32, angles: F32, n_rot: int, *, inverse: bool = False) -> F32:
    """Rotate adjacent pairs of the last n_rot dims of x (..., dim); angles (..., n_rot/2).

    angles must broadcast against x's leading axes (e.g. (n, 1, n_rot/2) for (n, H, Dh)).
    """
    c = np.cos(angles.astype(np.float64)).astype(np.float32)
    s = np.sin(angles.astype(np.float64)).astype(np.float32)
    if inverse:
        s = -s
    out = np.array(x, dtype=np.float32, copy=True)
    tail = out[..., out.shape[-1] - n_rot :]
    x0 = tail[..., 0::2].copy()
    x1 = tail[..., 1::2].copy()
    tail[..., 0::2] = x0 * c - x1 * s
    tail[..., 1::2] = x0 * s + x1 * c
    return out


# --- scalar ops ---
# Elementwise functions and RMSNorm with the precision docs/reference/model.md §2 prescribes.


def expf(x: F32) -> F32:
    """exp rounded once to f32 (as a correctly rounded libm expf would)."""
    out: F32 = np.exp(np.asarray(x, dtype=np.float64)).astype(np.float32)
    return out


def rmsnorm(x: F32, weight: F32 | None, eps: float) -> F32:
    """RMSNorm over the last axis: f64 sum of squares, f32 scale and products."""
    x = np.asarray(x, dtype=np.float32)
    x64 = x.astype(np.float64)
    mean = (np.sum(x64 * x64, axis=-1, keepdims=True) / x.shape[-1]).astype(np.float32)
    scale = (np.float32(1.0) / np.sqrt(mean + np.float32(eps))).astype(np.float32)
    y: F32 = (x * scale).astype(np.float32)
    if weight is not None:
        y = (y * weight).astype(np.float32)
    return y


def sigmoid(x: F32) -> F32:
    """The plain 1/(1+exp(-x)) form (HC pre/post)."""
    out: F32 = (np.float32(1.0) / (np.float32(1.0) + expf(-x))).astype(np.float32)
    return out


def sigmoid_stable(x: F32) -> F32:
    """1/(1+e^-x) for x >= 0, e^x/(1+e^x) below, so neither branch overflows."""
    x = np.asarray(x, dtype=np.float32)
    e = expf(-np.abs(x))
    one = np.float32(1.0)
    out: F32 = np.where(x >= 0, one / (one + e), e / (one + e)).astype(np.float32)
    return out


def silu(x: F32) -> F32:
    out: F32 = (x * sigmoid_stable(x)).astype(np.float32)
    return out


def softplus(x: F32) -> F32:
    x = np.asarray(x, dtype=np.float32)
    mid = np.log1p(np.exp(np.clip(x, -20, 20).astype(np.float64))).astype(np.float32)
    out: F32 = np.where(x > 20, x, np.where(x < -20, expf(x), mid)).astype(np.float32)
    return out


def f16round(x: F32) -> F32:
    """Round to IEEE binary16 (nearest even) and back: the cache storage rounding."""
    out: F32 = np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)
    return out


# --- attention ---
# Attention with sinks and the lightning indexer's top-k (docs/reference/model.md §3.5, §3.6).

I64 = npt.NDArray[np.int64]


def attend_with_sinks(q: F32, rows: F32, sinks: F32, scale: float) -> F32:
    """q (H, Dh) over rows (N, Dh) used as both K and V; each head's sink logit joins the
    softmax denominator unscaled and carries no value."""
    s = ((q @ rows.T) * np.float32(scale)).astype(np.float32)  # (H, N)
    mx = np.maximum(sinks, np.max(s, axis=1))
    w = expf(s - mx[:, None])
    den = (expf(sinks - mx) + np.sum(w, axis=1)).astype(np.float32)
    out: F32 = ((w @ rows) * (np.float32(1) / den)[:, None]).astype(np.float32)
    return out


def indexer_scores(index_rows: F32, iq: F32, weights: F32) -> F32:
    """score[c] = sum_h relu(index_rows[c] . iq[h]) * weights[h]."""
    dots = np.maximum((index_rows @ iq.T).astype(np.float32), np.float32(0))
    out: F32 = (dots @ weights).astype(np.float32)
    return out


def top_k_mask(scores: F32, k: int) -> I64:
    """Indices of the k largest scores (ties: lower index), returned in ascending order."""
    order = np.argsort(-scores, kind="stable")[:k]
    out: I64 = np.sort(order).astype(np.int64)
    return out


# --- compress ---
# Compressor pooling over a finished window (docs/reference/model.md §3.4), from per-token inputs.
#
# The engine keeps each token's compressor projections (kv, score = gate + ape) so the
# pooled row of any window can be formed directly: ratio 4 overlaps the previous window's
# first lane half with the current window's second half; other ratios pool one window.


EMPTY_SCORE = -1.0e30


def window_candidates(kv: F32, score: F32, last: int, ratio: int, d: int) -> tuple[F32, F32]:
    """(kv, score) candidate rows (m, d) of the window ending at token `last`, in ds4's order.

    kv/score: per-token projections (n_tokens, c*d). For ratio 4 the rows alternate
    previous-window token i (lanes [0, d)) and current-window token i (lanes [d, 2d));
    a previous window before token 0 is empty (score -1e30, kv 0).
    """
    start = last + 1 - ratio
    if ratio != 4:
        return kv[start : last + 1, :d], score[start : last + 1, :d]
    cand_kv = np.zeros((8, d), dtype=np.float32)
    cand_sc = np.full((8, d), EMPTY_SCORE, dtype=np.float32)
    for i in range(4):
        prev = start - 4 + i
        if prev >= 0:
            cand_kv[2 * i], cand_sc[2 * i] = kv[prev, :d], score[prev, :d]
        cand_kv[2 * i + 1], cand_sc[2 * i + 1] = kv[start + i, d:], score[start + i, d:]
    return cand_kv, cand_sc


def pool(cand_kv: F32, cand_sc: F32) -> F32:
    """Per output dim: softmax over candidates of the scores, weighting the kv values."""
    mx = np.max(cand_sc, axis=0)
    den = np.zeros(cand_kv.shape[1], dtype=np.float32)
    num = np.zeros(cand_kv.shape[1], dtype=np.float32)
    for i in range(cand_kv.shape[0]):
        w = expf(cand_sc[i] - mx)
        den = (den + w).astype(np.float32)
        num = (num + w * cand_kv[i]).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = (num / den).astype(np.float32)
    out: F32 = np.where(mx <= np.float32(-5e29), np.float32(0), pooled).astype(np.float32)
    return out


# --- routing ---
# MoE routing and the clamped SwiGLU (docs/reference/model.md §3.8, §3.9).


WEIGHT_SUM_FLOOR = 6.103515625e-05  # 2^-14


def route(
    logits: F32,
    bias: F32 | None,
    hash_ids: I64 | None,
    k: int,
    scale: float,
    normalize: bool,
) -> tuple[I64, F32]:
    """Pick k experts and their weights for one token.

    Scores are sqrt(softplus(logit)); the bias only steers the choice; hash layers take the
    ids from the token's table row. Weights are the unbiased scores of the chosen experts,
    renormalised (sum floored at 2^-14) and scaled.
    """
    prob = np.sqrt(softplus(logits)).astype(np.float32)
    if hash_ids is not None:
        ids = np.asarray(hash_ids, dtype=np.int64)
    else:
        sel = prob + bias if bias is not None else prob
        ids = np.argsort(-sel, kind="stable")[:k].astype(np.int64)
    wts = prob[ids]
    if normalize:
        total = np.float32(max(float(np.sum(wts, dtype=np.float32)), WEIGHT_SUM_FLOOR))
        wts = (wts / total).astype(np.float32)
    return ids, (wts * np.float32(scale)).astype(np.float32)


def clamped_swiglu(gate: F32, up: F32, limit: float) -> F32:
    """silu(min(gate, c)) * clip(up, -c, c): gate is clamped from above only."""
    if limit > 1e-6:
        gate = np.minimum(gate, np.float32(limit))
        up = np.clip(up, -np.float32(limit), np.float32(limit))
    out: F32 = (silu(gate) * up).astype(np.float32)
    return out


# --- hyper ---
# Hyper-connections: HC pre/post mixing with Sinkhorn, and the output collapse
# (docs/reference/model.md §3.2, §3.10).


@dataclass(frozen=True)
class HcMix:
    """Per token: pre (n, S) stream weights, post (n, S), comb (n, S, S) with comb[i][j]
    = weight of source stream i in destination stream j."""

    pre: F32
    post: F32
    comb: F32


def sinkhorn(logits: F32, iters: int, eps: float) -> F32:
    """Row softmax + eps, column normalisation, then iters-1 more (row, column) rounds.

    Each normaliser is a reciprocal computed once and multiplied, as ds4 does.
    """
    one, e = np.float32(1), np.float32(eps)
    ex = expf(logits - np.max(logits, axis=-1, keepdims=True))
    c = (ex * (one / np.sum(ex, axis=-1, keepdims=True)) + e).astype(np.float32)
    c = (c * (one / (np.sum(c, axis=-2, keepdims=True) + e))).astype(np.float32)
    for _ in range(iters - 1):
        c = (c * (one / (np.sum(c, axis=-1, keepdims=True) + e))).astype(np.float32)
        c = (c * (one / (np.sum(c, axis=-2, keepdims=True) + e))).astype(np.float32)
    out: F32 = c
    return out


def hc_split(mix: F32, scale: F32, base: F32, n_hc: int, iters: int, eps: float) -> HcMix:
    """Turn the (n, 2S + S^2) projection of the normalised streams into pre/post/comb."""
    s = n_hc
    pre = (sigmoid((mix[:, :s] * scale[0] + base[:s]).astype(np.float32)) + np.float32(eps)).astype(
        np.float32
    )
    post = (
        np.float32(2) * sigmoid((mix[:, s : 2 * s] * scale[1] + base[s : 2 * s]).astype(np.float32))
    ).astype(np.float32)
    logits = (mix[:, 2 * s :] * scale[2] + base[2 * s :]).astype(np.float32).reshape(-1, s, s)
    return HcMix(pre, post, sinkhorn(logits, iters, eps))


def weighted_streams(streams: F32, weights: F32) -> F32:
    """sum_h weights[:, h] * streams[:, h], accumulated stream by stream in order."""
    acc = np.zeros(streams[:, 0].shape, dtype=np.float32)
    for h in range(streams.shape[1]):
        acc = (acc + weights[:, h : h + 1] * streams[:, h]).astype(np.float32)
    return acc


def hc_post(y: F32, streams: F32, mix: HcMix) -> F32:
    """X_new[j] = post[j] * y + sum_i comb[i][j] * X[i] (i = source, j = destination)."""
    n_hc = streams.shape[1]
    out = np.empty_like(streams)
    for j in range(n_hc):
        acc = (mix.post[:, j : j + 1] * y).astype(np.float32)
        for i in range(n_hc):
            acc = (acc + mix.comb[:, i, j : j + 1] * streams[:, i]).astype(np.float32)
        out[:, j] = acc
    return out


def head_weights(mix: F32, scale: F32, base: F32, eps: float) -> F32:
    """Output-head stream weights: sigmoid(pre * scale + base) + eps (no post, no comb)."""
    z = (mix * scale[0] + base).astype(np.float32)
    out: F32 = (sigmoid_stable(z) + np.float32(eps)).astype(np.float32)
    return out
