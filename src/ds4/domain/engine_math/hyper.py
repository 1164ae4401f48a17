"""Hyper-connections: HC pre/post mixing with Sinkhorn, and the output collapse
(docs/reference/model.md §3.2, §3.10)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.engine_math.scalar_ops import expf, sigmoid, sigmoid_stable

F32 = npt.NDArray[np.float32]


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
