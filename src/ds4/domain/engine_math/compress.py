"""Compressor pooling over a finished window (docs/reference/model.md §3.4), from per-token inputs.

The engine keeps each token's compressor projections (kv, score = gate + ape) so the
pooled row of any window can be formed directly: ratio 4 overlaps the previous window's
first lane half with the current window's second half; other ratios pool one window.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.domain.engine_math.scalar_ops import expf

F32 = npt.NDArray[np.float32]

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
