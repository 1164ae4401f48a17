"""Indexer scores and top-k on the device == the reference's indexer_scores and top_k_mask.

Scores: |s - ref| <= 1e-4 * sum_h |relu(dot_h) * w_h| (f32 sums in another order). Top-k:
the same indices as top_k_mask on the same scores, always (ties: lower index first), and
end to end on inputs whose k-th and (k+1)-th scores are not near-ties."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from ds4.adapters.compute.vulkan.compressor import indexer_select, record_topk, visible_rows
from ds4.adapters.compute.vulkan.runtime import Recorder, VulkanRuntime
from ds4.domain.engine_math.layers import indexer_scores, top_k_mask
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


def _topk_on_device(vk: VulkanRuntime, scores: F32, pos0: int, ratio: int, k: int) -> list[I64]:
    n_q, stride = scores.shape
    sb, selb = vk.host_buffer(scores.nbytes), vk.host_buffer(n_q * k * 4)
    sb.write(np.ascontiguousarray(scores))

    def record(rec: Recorder) -> None:
        record_topk(rec, sb, selb, n_q=n_q, k=k, pos0=pos0, ratio=ratio, stride=stride)

    vk.run(record)
    sel = selb.read(np.uint32, n_q * k).reshape(n_q, k).astype(np.int64)
    sb.release()
    selb.release()
    counts = visible_rows(pos0, n_q, ratio)
    return [sel[t, : min(n, k)] for t, n in enumerate(counts)]


@pytest.mark.parametrize(
    ("pos0", "n_q", "k"),
    [(0, 9, 1), (0, 40, 4), (20, 5, 4), (2047, 3, 512), (4095, 2, 512), (1000, 4, 250)],
)
def test_top_k_is_the_reference_selection(vk: VulkanRuntime, pos0: int, n_q: int, k: int) -> None:
    # Counts below, at and above k, not powers of two; some queries have n_t <= k.
    stride = max(visible_rows(pos0, n_q, 4)[-1], 1)
    rng = np.random.default_rng(pos0 + k)
    scores = (rng.standard_normal((n_q, stride)) * 10).astype(np.float32)
    got = _topk_on_device(vk, scores, pos0, 4, k)
    for t, n in enumerate(visible_rows(pos0, n_q, 4)):
        want = top_k_mask(scores[t, :n], k) if n > k else np.arange(n)
        assert np.array_equal(got[t], want)


def test_ties_go_to_the_lower_index(vk: VulkanRuntime) -> None:
    # Few distinct values (so k cuts through groups of equal scores), signed zeros equal.
    rng = np.random.default_rng(11)
    n_q, pos0, k = 6, 3000, 100
    stride = visible_rows(pos0, n_q, 4)[-1]
    scores = rng.integers(-3, 4, (n_q, stride)).astype(np.float32)
    scores[scores == 0] = np.where(rng.random(int(np.sum(scores == 0))) < 0.5, -0.0, 0.0)
    scores[1] = 7.0  # all equal: the first k rows
    got = _topk_on_device(vk, scores, pos0, 4, k)
    assert np.array_equal(got[1], np.arange(k))
    for t, n in enumerate(visible_rows(pos0, n_q, 4)):
        assert np.array_equal(got[t], top_k_mask(scores[t, :n], k))


@pytest.mark.parametrize(("pos0", "n_q", "n_head", "dim"), [(0, 12, 4, 128), (2051, 3, 64, 128),
                                                           (37, 5, 3, 20)])  # fmt: skip
def test_scores_and_selection_agree_end_to_end(
    vk_any: VulkanRuntime, pos0: int, n_q: int, n_head: int, dim: int
) -> None:
    k = 512 if pos0 > 2048 else 3
    counts = visible_rows(pos0, n_q, 4)
    rng = np.random.default_rng(n_head)
    rows = rng.standard_normal((counts[-1], dim)).astype(np.float32)
    iq = rng.standard_normal((n_q, n_head, dim)).astype(np.float32)
    w = rng.standard_normal((n_q, n_head)).astype(np.float32)
    w_scale = float(np.float32(1.0 / np.sqrt(dim * n_head)))
    got_scores, got_sel = indexer_select(rows, iq, w, pos0=pos0, k=k, w_scale=w_scale, rt=vk_any)
    w = (w * np.float32(w_scale)).astype(np.float32)  # the reference scales the weights first
    worst = 0.0
    for t, n in enumerate(counts):
        ref = indexer_scores(rows[:n], iq[t], w[t])
        scale = np.maximum(rows[:n] @ iq[t].T, 0) @ np.abs(w[t])
        err = np.abs(got_scores[t, :n] - ref)
        assert np.all(err <= 1e-4 * scale + 1e-30)
        worst = max(worst, float(np.max(err / (scale + 1e-30), initial=0.0)))
        if n > k:  # no near-tie at the cut on these inputs, so the sets must be equal
            srt = np.sort(ref)[::-1]
            assert srt[k - 1] - srt[k] > 1e-3 * abs(srt[k - 1])
        want = top_k_mask(ref, k) if n > k else np.arange(n)
        assert np.array_equal(got_sel[t], want)
    assert worst < 1e-4


def test_bad_shapes_are_refused(vk: VulkanRuntime) -> None:
    rows, iq, w = np.ones((2, 8), np.float32), np.ones((3, 2, 8), np.float32), np.ones((3, 2))
    with pytest.raises(Ds4Error, match="needs 3 rows"):
        indexer_select(rows, iq, w, pos0=10, k=4, rt=vk)
    with pytest.raises(Ds4Error, match="do not fit"):
        indexer_select(rows, iq[:, :, :4], w, pos0=0, k=4, rt=vk)
