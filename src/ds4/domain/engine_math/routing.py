"""MoE routing and the clamped SwiGLU (docs/reference/model.md §3.8, §3.9)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.domain.engine_math.scalar_ops import silu, softplus

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

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
