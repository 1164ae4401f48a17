"""StepLogprobs: log-softmax in float64, top-k ordered by logit then id, ranks."""

from __future__ import annotations

import math

import numpy as np

from ds4.domain.sampling import StepLogprobs, argmax


def test_logprobs_are_a_normalized_log_softmax() -> None:
    logits = np.array([1.0, 3.0, -2.0, 0.5], dtype=np.float32)
    step = StepLogprobs(logits)
    probs = [math.exp(step.logprob(i)) for i in range(4)]
    assert math.isclose(sum(probs), 1.0, rel_tol=1e-12)
    expected = logits.astype(np.float64) - np.log(np.exp(logits.astype(np.float64)).sum())
    assert np.allclose([step.logprob(i) for i in range(4)], expected, atol=1e-12)


def test_top_is_ordered_by_logit_then_id_and_ranks_count_from_one() -> None:
    logits = np.array([2.0, 5.0, 5.0, -1.0, 2.0], dtype=np.float32)
    top = StepLogprobs(logits).top(4)
    assert [t.id for t in top] == [1, 2, 0, 4]
    assert [t.rank for t in top] == [1, 2, 3, 4]
    assert top[0].id == argmax(logits)


def test_the_rank_of_any_token_agrees_with_the_top_list() -> None:
    rng = np.random.default_rng(3)
    logits = rng.standard_normal(500).astype(np.float32)
    logits[[7, 90]] = logits[400]  # ties are ordered by id
    step = StepLogprobs(logits)
    for entry in step.top(500):
        assert step.token(entry.id).rank == entry.rank


def test_non_finite_logits_rank_last_and_have_no_probability() -> None:
    logits = np.array([0.0, np.nan, 1.0, -np.inf], dtype=np.float32)
    step = StepLogprobs(logits)
    assert [t.id for t in step.top(2)] == [2, 0]
    assert step.logprob(1) == -math.inf and step.logprob(3) == -math.inf
    assert math.isclose(math.exp(step.logprob(0)) + math.exp(step.logprob(2)), 1.0)
    assert step.token(1).rank > 2
