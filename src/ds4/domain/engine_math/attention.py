"""Attention with sinks and the lightning indexer's top-k (docs/reference/model.md §3.5, §3.6)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.domain.engine_math.scalar_ops import expf

F32 = npt.NDArray[np.float32]
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
