"""accept_draft: greedy drafts kept exactly when they are the arg-max; sampled drafts by
the speculative-sampling rule, which leaves each token's distribution the sampler's."""

from __future__ import annotations

import numpy as np

from ds4.domain.sampling import (
    GREEDY,
    SamplingParams,
    XorShiftStar,
    accept_draft,
    candidates,
    sample,
)

LOGITS = np.array([2.0, 1.0, 0.5, -1.0, 1.5, -np.inf], dtype=np.float32)


def test_greedy_keeps_the_arg_max_and_names_it_otherwise() -> None:
    rng = XorShiftStar(5)
    state = rng.state
    assert accept_draft(LOGITS, GREEDY, 0, rng) == (True, 0)
    assert accept_draft(LOGITS, GREEDY, 4, rng) == (False, 0)
    assert rng.state == state  # greedy draws nothing


def _frequencies(params: SamplingParams, draft: int, n: int, seed: int) -> np.ndarray:
    rng = XorShiftStar(seed)
    counts = np.zeros(LOGITS.size)
    for _ in range(n):
        _kept, token = accept_draft(LOGITS, params, draft, rng)
        counts[token] += 1
    return counts / n


def _distribution(params: SamplingParams) -> np.ndarray:
    ids, probs = candidates(LOGITS, params)
    p = np.zeros(LOGITS.size)
    p[ids] = probs / probs.sum()
    return p


def test_sampled_acceptance_preserves_the_samplers_distribution() -> None:
    n = 5_000
    for params in (
        SamplingParams(temperature=1.0, seed=1),
        SamplingParams(temperature=1.3, top_k=3, top_p=0.9, seed=1),
    ):
        want = _distribution(params)
        for draft in (0, 2, 3):  # likely, unlikely, filtered out
            got = _frequencies(params, draft, n, seed=11 + draft)
            # 4.5 sigma of a binomial share: a fixed seed, so no flakiness either way
            assert np.all(np.abs(got - want) <= 4.5 * np.sqrt(want * (1 - want) / n) + 1e-9), (
                params, draft, got, want,
            )  # fmt: skip


def test_the_plain_sampler_agrees_with_the_same_distribution() -> None:
    """The check above would pass for any sampler if _distribution were wrong: tie it
    to the sampler itself."""
    params = SamplingParams(temperature=1.3, top_k=3, top_p=0.9, seed=1)
    rng = XorShiftStar(3)
    counts = np.bincount([sample(LOGITS, params, rng) for _ in range(5_000)], minlength=6)
    assert np.allclose(counts / 5_000, _distribution(params), atol=0.03)


def test_a_draft_outside_the_candidates_is_never_kept() -> None:
    params = SamplingParams(temperature=1.0, top_k=2, seed=1)
    rng = XorShiftStar(9)
    for _ in range(200):
        kept, token = accept_draft(LOGITS, params, 3, rng)
        assert not kept and token in (0, 4)
