"""Next-token choice from logits (docs/reference/server.md §4.7), in float32 as the
engine does: the settings of one generation, the sampler's generator, the candidate
filters and the draw, the rule that keeps or replaces a drafted token, and the
log-probabilities the dumps and test vectors report.

Order of the candidate filters: top_k restricts to the k best logits, then min_p
keeps candidates whose probability is at least min_p times the best one, then top_p
keeps the shortest descending run whose normalized mass reaches top_p. The draw
r = U * kept_mass walks kept candidates subtracting each probability until r <= 0;
sequential float32 subtraction (ufunc.accumulate) keeps the token choice exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

_F32 = np.float32

# ---- settings, normalized as docs/reference/server.md §4.7 says ----------------------

MAX_TOP_K = 1024


@dataclass(frozen=True)
class SamplingParams:
    """temperature <= 0 means greedy; top_k <= 0, top_p = 1 and min_p = 0 mean off.

    `seed` must already be resolved to a positive value (the caller draws one from a
    random-source port when the user gave none), so a run is reproducible from it.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int = 1

    @property
    def greedy(self) -> bool:
        return not self.temperature > 0  # NaN is greedy too

    def normalized(self) -> SamplingParams:
        """Out-of-range values mapped to their 'off' meaning."""
        top_p = self.top_p if 0.0 < self.top_p <= 1.0 else 1.0
        min_p = self.min_p if self.min_p > 0.0 else 0.0
        return SamplingParams(
            temperature=self.temperature,
            top_k=min(self.top_k, MAX_TOP_K),
            top_p=top_p,
            min_p=min_p,
            seed=self.seed,
        )


GREEDY = SamplingParams(temperature=0.0)


def seed_from_bytes(data: bytes) -> int:
    """A positive 64-bit seed from random bytes (a RandomSource's output)."""
    value = int.from_bytes(data[:8].ljust(8, b"\0"), "little") & ((1 << 63) - 1)
    return value or 1


# ---- the 64-bit xorshift* generator (docs/reference/server.md §4.7), bit for bit -----

_MASK = (1 << 64) - 1
_ZERO_SEED = 0x9E3779B97F4A7C15
_MULTIPLIER = 0x2545F4914F6CDD1D


class XorShiftStar:
    def __init__(self, seed: int) -> None:
        """`seed` is taken modulo 2**64; 0 would stick at 0, so it is replaced."""
        self.state = (seed & _MASK) or _ZERO_SEED

    def next_u64(self) -> int:
        x = self.state
        x ^= x >> 12
        x ^= (x << 25) & _MASK
        x ^= x >> 27
        self.state = x
        return (x * _MULTIPLIER) & _MASK

    def uniform(self) -> float:
        """U in [0, 1) with 24 random bits (exact in float32)."""
        return ((self.next_u64() >> 40) & 0xFFFFFF) / 16777216.0


# ---- the candidate filters and the draw ----------------------------------------------


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


# ---- the token mask of a grammar (docs/structured-outputs.md) ----------------------
# A separate step before the filters: tokens a constraint refuses get -inf, so the
# filters and the draw (or the arg-max) see only allowed ones. The mask is packed
# 32 ids per int32 word, bit i % 32 of word i // 32 (llguidance's layout); ids past
# the mask's end are refused.


def allowed_ids(bitmask: npt.NDArray[np.int32], vocab: int) -> npt.NDArray[np.bool_]:
    """The packed mask unpacked to one bool per id (length `vocab`)."""
    bits = np.unpackbits(np.ascontiguousarray(bitmask).view(np.uint8), bitorder="little")
    allowed = np.zeros(vocab, dtype=np.bool_)
    n = min(vocab, bits.size)
    allowed[:n] = bits[:n].astype(np.bool_)
    return allowed


def masked_logits(
    logits: npt.NDArray[np.float32], bitmask: npt.NDArray[np.int32]
) -> npt.NDArray[np.float32]:
    """A copy of `logits` with every id the mask refuses at -inf."""
    values = np.asarray(logits, dtype=_F32)
    return np.where(allowed_ids(bitmask, values.size), values, _F32(-np.inf)).astype(_F32)


# ---- whether the main model keeps a drafted token ------------------------------------
# (docs/adr/0054-mtp-speculative-decoding.md)
# Greedy: the draft is kept when it is the arg-max; otherwise the arg-max follows.
# Sampled: the standard speculative-sampling rule for a draft that was proposed with
# probability 1 (the MTP drafter is greedy): keep it with probability p(d), the main
# model's probability of d after temperature, top-k, min-p and top-p (the sampler's own
# candidate list); otherwise draw from p with d removed, renormalised. Then every token
# x comes out with probability p(d)·[x = d] + (1 − p(d))·p(x)/(1 − p(d))·[x ≠ d] = p(x):
# the distribution of each token is the sampler's, although the draws differ from a
# run without drafts (the generator is consumed differently).


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


# ---- log-probabilities from raw logits -----------------------------------------------
# The top-k list `ds4 cli --dump-logprobs` writes, and the log-probability and rank of
# any token, which `ds4 test-vectors` and `ds4 gguf score` compare against recorded
# vectors (docs/test-vectors.md). Computed in float64 over the finite logits:
# logprob = logit - logsumexp(logits). Tokens are ordered by logit, ties by id (the
# first id wins), as argmax does.


@dataclass(frozen=True)
class Ranked:
    """One token of a step: its logit, log-probability and 1-based rank."""

    id: int
    logit: float
    logprob: float
    rank: int


class StepLogprobs:
    """The log-softmax of one step's logits, with top-k and per-token lookups."""

    def __init__(self, logits: npt.NDArray[np.float32]) -> None:
        values = np.asarray(logits).astype(np.float64)
        finite = np.isfinite(values)
        self._values = values
        self._finite = finite
        self._sortable = np.where(finite, values, -np.inf)
        if finite.any():
            top = float(values[finite].max())
            self.log_norm = top + math.log(float(np.exp(values[finite] - top).sum()))
        else:
            self.log_norm = 0.0

    @property
    def vocab(self) -> int:
        return int(self._values.size)

    def top(self, k: int) -> list[Ranked]:
        """The k best tokens, best first (ties by id). Only the tokens at or above the
        k-th best value are sorted (all of its ties kept), which orders them exactly as
        sorting the whole vocabulary would, at a fraction of the cost per step."""
        k = max(0, min(k, self.vocab))
        if k == 0:
            return []
        ids = np.arange(self.vocab)
        if k < self.vocab:
            kth = np.partition(self._sortable, self.vocab - k)[self.vocab - k]
            ids = np.flatnonzero(self._sortable >= kth)
        order = ids[np.lexsort((ids, -self._sortable[ids]))][:k]
        return [self._ranked(int(i), rank) for rank, i in enumerate(order, start=1)]

    def token(self, token_id: int) -> Ranked:
        """Any token's numbers; its rank counts the tokens ordered before it."""
        value = self._sortable[token_id]
        ahead = int(np.count_nonzero(self._sortable > value))
        ahead += int(np.count_nonzero(self._sortable[:token_id] == value))
        return self._ranked(token_id, ahead + 1)

    def logprob(self, token_id: int) -> float:
        if not self._finite[token_id]:
            return -math.inf
        return float(self._values[token_id] - self.log_norm)

    def _ranked(self, token_id: int, rank: int) -> Ranked:
        return Ranked(token_id, float(self._values[token_id]), self.logprob(token_id), rank)


# ---- what the server reports per token (docs/reference/server.md "Log-probabilities") ----
# The log-probability of a chosen token and its `top` best alternatives, from the same
# StepLogprobs as `--dump-logprobs`: the raw logits' log-softmax, before temperature,
# top-k/top-p/min-p and any other sampler transform.


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One token of a reply (or of an echoed prompt): its id, bytes and log-probability,
    and its `top` alternatives, best first (their own `top` is empty).

    `logprob` is None only for the first token of an echoed prompt, which no
    distribution predicts (OpenAI reports null there)."""

    id: int
    raw: bytes
    logprob: float | None
    top: tuple[TokenLogprob, ...] = ()


def token_logprob(
    logits: npt.NDArray[np.float32], token: int, top: int, token_bytes: Callable[[int], bytes]
) -> TokenLogprob:
    """`token`'s log-probability under `logits` and the `top` best alternatives."""
    step = StepLogprobs(logits)
    best = tuple(
        TokenLogprob(entry.id, token_bytes(entry.id), entry.logprob) for entry in step.top(top)
    )
    return TokenLogprob(token, token_bytes(token), step.logprob(token), best)
