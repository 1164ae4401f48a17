"""Whether the main model keeps a drafted token (docs/adr/0054-mtp-speculative-decoding.md).

Greedy: the draft is kept when it is the arg-max; otherwise the arg-max follows.

Sampled: the standard speculative-sampling rule for a draft that was proposed with
probability 1 (the MTP drafter is greedy): keep it with probability p(d), the main
model's probability of d after temperature, top-k, min-p and top-p (the sampler's own
candidate list); otherwise draw from p with d removed, renormalised. Then every token x
comes out with probability p(d)·[x = d] + (1 − p(d))·p(x)/(1 − p(d))·[x ≠ d] = p(x):
the distribution of each token is the sampler's, although the draws differ from a
run without drafts (the generator is consumed differently).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.domain.sampling.params import SamplingParams
from ds4.domain.sampling.rng import XorShiftStar
from ds4.domain.sampling.sampler import argmax, candidates

_F32 = np.float32


def accept_draft(
    logits: npt.NDArray[np.float32], params: SamplingParams, draft: int, rng: XorShiftStar
) -> tuple[bool, int]:
    """(kept, token): token is the draft when kept, else the token to use instead."""
    if params.greedy:
        best = argmax(logits)
        return best == draft, best
    ids, probs = candidates(logits, params)
    if ids.size == 0:  # the sampler falls back to the arg-max
        best = argmax(logits)
        return best == draft, best
    total = np.cumsum(probs, dtype=_F32)[-1]
    at = np.flatnonzero(ids == draft)
    p_draft = probs[at[0]] / total if at.size else _F32(0)
    if at.size and _F32(rng.uniform()) < p_draft:
        return True, draft
    rest = ids != draft
    ids, probs = ids[rest], probs[rest]
    if ids.size == 0:  # d was the only candidate (p(d) = 1): the draw above kept it
        return True, draft
    kept_mass = np.cumsum(probs, dtype=_F32)[-1]
    r = _F32(rng.uniform()) * kept_mass
    remaining = np.subtract.accumulate(np.concatenate(([r], probs)).astype(_F32), dtype=_F32)
    hit = np.flatnonzero(remaining[1:] <= 0)
    return False, int(ids[hit[0]] if hit.size else ids[-1])
