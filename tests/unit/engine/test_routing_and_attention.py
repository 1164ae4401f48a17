"""Routing, SwiGLU clamp, compressor pooling, attention sinks, indexer top-k
(docs/reference/model.md §3.4–3.9)."""

from __future__ import annotations

import numpy as np

from ds4.domain.engine_math.layers import (
    attend_with_sinks,
    clamped_swiglu,
    pool,
    route,
    softplus,
    top_k_mask,
    window_candidates,
)


def test_bias_only_chooses_and_weights_are_renormalised_unbiased_scores() -> None:
    logits = np.array([2.0, 1.0, 0.5, 3.0], np.float32)
    bias = np.array([0.0, 5.0, 0.0, 0.0], np.float32)
    ids, wts = route(logits, bias, None, 2, 1.5, True)
    assert ids.tolist() == [1, 3]
    prob = np.sqrt(softplus(logits))
    assert np.allclose(wts, prob[[1, 3]] / prob[[1, 3]].sum() * 1.5)


def test_hash_routing_takes_table_ids_in_table_order() -> None:
    logits = np.array([9.0, 0.0, 0.0, 0.0], np.float32)
    ids, wts = route(logits, np.ones(4, np.float32), np.array([2, 1]), 2, 1.0, True)
    assert ids.tolist() == [2, 1] and np.isclose(wts.sum(), 1.0)


def test_router_ties_pick_the_lower_index() -> None:
    ids, _ = route(np.zeros(6, np.float32), None, None, 3, 1.0, True)
    assert ids.tolist() == [0, 1, 2]


def test_swiglu_clamps_gate_from_above_and_up_both_sides() -> None:
    gate = np.array([20.0, -20.0], np.float32)
    up = np.array([-30.0, 30.0], np.float32)
    out = clamped_swiglu(gate, up, 10.0)
    silu10 = 10.0 / (1 + np.exp(-10.0))
    silu_m20 = -20.0 / (1 + np.exp(20.0))
    assert np.allclose(out, [silu10 * -10.0, silu_m20 * 10.0], rtol=1e-6)


def test_first_ratio4_window_ignores_the_empty_previous_lane() -> None:
    d = 3
    kv = np.arange(4 * 2 * d, dtype=np.float32).reshape(4, 2 * d)
    score = np.zeros((4, 2 * d), np.float32)
    cand_kv, cand_sc = window_candidates(kv, score, 3, 4, d)
    pooled = pool(cand_kv, cand_sc)
    assert np.allclose(pooled, kv[:, d:].mean(axis=0))  # equal scores: plain mean of lane 2


def test_ratio_pool_is_a_per_dimension_softmax_over_tokens() -> None:
    kv = np.array([[1.0, 5.0], [3.0, 7.0]], np.float32)
    score = np.array([[0.0, 100.0], [np.log(3.0), 0.0]], np.float32)
    cand_kv, cand_sc = window_candidates(kv, score, 1, 2, 2)
    assert np.allclose(pool(cand_kv, cand_sc), [0.25 * 1 + 0.75 * 3, 5.0], atol=1e-5)
    empty = np.full((2, 2), -1e30, np.float32)
    assert pool(kv, empty).tolist() == [0.0, 0.0]


def test_sink_joins_the_denominator_without_a_value() -> None:
    q = np.zeros((2, 4), np.float32)
    rows = np.array([[2.0, 0, 0, 0], [4.0, 0, 0, 0]], np.float32)
    sinks = np.array([-1e30, 0.0], np.float32)
    out = attend_with_sinks(q, rows, sinks, 0.5)
    assert np.allclose(out[0], [3.0, 0, 0, 0])  # no sink: mean of the rows
    assert np.allclose(out[1], [2.0, 0, 0, 0])  # sink weight 1 of 3: 2/3 of the mean


def test_top_k_prefers_lower_index_on_ties_and_keeps_chronological_order() -> None:
    scores = np.array([1.0, 3.0, 3.0, 0.0, 3.0], np.float32)
    assert top_k_mask(scores, 2).tolist() == [1, 2]
    assert top_k_mask(scores, 4).tolist() == [0, 1, 2, 4]
