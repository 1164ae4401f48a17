"""Pick the next token (docs/reference/server.md §4.7) in float32, as the engine does.

Order of the candidate filters: top_k restricts to the k best logits, then min_p
keeps candidates whose probability is at least min_p times the best one, then top_p
keeps the shortest descending run whose normalized mass reaches top_p. The draw
r = U * kept_mass walks kept candidates subtracting each probability until r <= 0;
sequential float32 subtraction (ufunc.accumulate) keeps the token choice exact.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.domain.sampling.params import SamplingParams
from ds4.domain.sampling.rng import XorShiftStar

_F32 = np.float32


def argmax(logits: npt.NDArray[np.float32]) -> int:
    """The first index of the largest finite logit (0 if none is finite)."""
    finite = np.where(np.isfinite(logits), logits, -np.inf)
    return int(np.argmax(finite))


def relative_probabilities(
    logits: npt.NDArray[np.float32], temperature: float
) -> npt.NDArray[np.float32]:
    """exp((logit - max) / T) in float32; non-finite logits get 0."""
    values = np.asarray(logits, dtype=_F32)
    finite = np.isfinite(values)
    if not finite.any():
        return np.zeros_like(values)
    top = values[finite].max()
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        scaled = (values - top) / _F32(temperature)
        probs = np.exp(scaled, dtype=_F32)
    return np.where(finite, probs, _F32(0)).astype(_F32)


def candidates(
    logits: npt.NDArray[np.float32], params: SamplingParams
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Kept token ids and their relative probabilities, in draw order.

    Draw order is descending probability (ties by id) on the sorted paths and
    vocabulary order when neither top_k nor top_p is active.
    """
    p = params.normalized()
    probs = relative_probabilities(logits, p.temperature)
    if p.top_k <= 0 and p.top_p >= 1.0:
        ids = np.flatnonzero((probs > 0) & (probs >= _F32(p.min_p)))
        return ids.astype(np.int64), probs[ids]
    if 0 < p.top_k < probs.size:
        best = np.argpartition(-probs, p.top_k - 1)[: p.top_k]
    else:
        best = np.arange(probs.size)
    order = best[np.lexsort((best, -probs[best]))]
    order = order[probs[order] > 0]
    kept = probs[order]
    if p.min_p > 0.0 and kept.size:
        keep = kept >= kept[0] * _F32(p.min_p)
        order, kept = order[keep], kept[keep]
    if p.top_p < 1.0 and kept.size:
        total = np.cumsum(kept, dtype=_F32)[-1]
        mass = np.cumsum(kept / total, dtype=_F32)
        reached = np.flatnonzero(mass >= _F32(p.top_p))
        stop = int(reached[0]) + 1 if reached.size else kept.size
        order, kept = order[:stop], kept[:stop]
    return order.astype(np.int64), kept


def sample(logits: npt.NDArray[np.float32], params: SamplingParams, rng: XorShiftStar) -> int:
    """One token id. Greedy (temperature <= 0) draws nothing from the generator."""
    if params.greedy:
        return argmax(logits)
    ids, probs = candidates(logits, params)
    if ids.size == 0:
        return argmax(logits)
    kept_mass = np.cumsum(probs, dtype=_F32)[-1]
    r = _F32(rng.uniform()) * kept_mass
    remaining = np.subtract.accumulate(np.concatenate(([r], probs)).astype(_F32), dtype=_F32)
    hit = np.flatnonzero(remaining[1:] <= 0)
    return int(ids[hit[0]] if hit.size else ids[-1])
