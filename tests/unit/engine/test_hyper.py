"""Hyper-connections: Sinkhorn normalisation and the comb orientation
(docs/reference/model.md §3.2, §6)."""

from __future__ import annotations

import numpy as np

from ds4.domain.engine_math.layers import HcMix, hc_post, hc_split, sinkhorn, weighted_streams


def test_sinkhorn_columns_sum_to_one_and_rows_nearly() -> None:
    logits = np.random.default_rng(0).normal(size=(5, 4, 4)).astype(np.float32) * 3
    c = sinkhorn(logits, 20, 1e-6)
    assert np.allclose(c.sum(axis=-2), 1, atol=1e-5)
    assert np.allclose(c.sum(axis=-1), 1, atol=1e-2)  # 20 rounds: rows converge slower
    assert np.all(c > 0)


def test_one_sinkhorn_iteration_is_softmax_then_column_normalisation() -> None:
    logits = np.array([[[0.0, 1.0], [2.0, 0.0]]], dtype=np.float32)
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    soft = e / e.sum(axis=-1, keepdims=True) + 1e-6
    want = soft / (soft.sum(axis=-2, keepdims=True) + 1e-6)
    assert np.allclose(sinkhorn(logits, 1, 1e-6), want, atol=1e-7)


def test_hc_post_sends_comb_i_j_from_source_i_to_destination_j() -> None:
    streams = np.array([[[1.0], [10.0]]], dtype=np.float32)  # (n=1, S=2, D=1)
    comb = np.array([[[0.0, 1.0], [0.0, 0.0]]], dtype=np.float32)  # only C[0][1]
    mix = HcMix(pre=np.ones((1, 2), np.float32), post=np.array([[0.5, 0.0]], np.float32), comb=comb)
    out = hc_post(np.array([[4.0]], np.float32), streams, mix)
    assert out[0, :, 0].tolist() == [2.0, 1.0]  # dest 0: post*y; dest 1: stream 0


def test_hc_split_pre_post_ranges() -> None:
    n_hc = 4
    mix = np.zeros((1, 2 * n_hc + n_hc * n_hc), np.float32)
    split = hc_split(mix, np.ones(3, np.float32), np.zeros(24, np.float32), n_hc, 20, 1e-6)
    assert np.allclose(split.pre, 0.5 + 1e-6) and np.allclose(split.post, 1.0)
    assert np.allclose(split.comb, 0.25, atol=1e-5)
    streams = np.arange(8, dtype=np.float32).reshape(1, 4, 2)
    assert np.allclose(weighted_streams(streams, split.pre), (0.5 + 1e-6) * streams.sum(axis=1))
