"""HC pre / post / head collapse on the GPU against the reference's own functions
(domain/engine_math/layers.py): fp32 contract 1e-4 relative (docs/vulkan.md)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from ds4.adapters.compute.vulkan.hc import HEAD, LAYER, hc_post, hc_pre, split_width
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.adapters.compute.vulkan.weights import upload_weights
from ds4.domain.engine_math.layers import hc_post as ref_hc_post
from ds4.domain.engine_math.layers import hc_split, head_weights, rmsnorm, weighted_streams
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType

F32 = npt.NDArray[np.float32]
REL = 1e-4


def _inputs(n_tok: int, n_hc: int, dim: int, mode: int, seed: int) -> tuple[F32, F32, F32, F32]:
    rng = np.random.default_rng(seed)
    width = split_width(n_hc, mode)
    streams = rng.standard_normal((n_tok, n_hc, dim)).astype(np.float32)
    fn = (rng.standard_normal((width, n_hc * dim)) * 0.05).astype(np.float32)
    scale = rng.uniform(0.5, 2.0, 3).astype(np.float32)
    base = rng.standard_normal(width).astype(np.float32)
    return streams, fn, scale, base


def _ref_mix(streams: F32, fn: F32, eps: float) -> F32:
    flat = rmsnorm(streams.reshape(streams.shape[0], -1), None, eps)
    out: F32 = (flat.astype(np.float64) @ fn.T.astype(np.float64)).astype(np.float32)
    return out


@pytest.mark.parametrize(("n_tok", "n_hc", "dim"), [(1, 4, 256), (3, 4, 100), (2, 1, 7),
                                                    (5, 8, 65)])  # fmt: skip
def test_hc_pre_matches_reference(vk_any: VulkanRuntime, n_tok: int, n_hc: int, dim: int) -> None:
    streams, fn, scale, base = _inputs(n_tok, n_hc, dim, LAYER, seed=n_tok * 10 + n_hc)
    w = upload_weights(fn.view(np.uint8), GGMLType.F32, n_hc * dim, rt=vk_any)
    x, split = hc_pre(streams, w, scale, base, iters=20, hc_eps=1e-6, rms_eps=1e-6)
    mix = _ref_mix(streams, fn, 1e-6)
    ref = hc_split(mix, scale, base, n_hc, 20, 1e-6)
    want = np.concatenate([ref.pre, ref.post, ref.comb.reshape(n_tok, -1)], axis=1)
    assert np.max(np.abs(split - want)) <= REL * np.max(np.abs(want))
    ref_x = weighted_streams(streams, ref.pre)
    bound = np.einsum("th,thd->td", np.abs(ref.pre), np.abs(streams))
    assert np.all(np.abs(x - ref_x) <= REL * bound)
    w.release()


def test_hc_split_is_bit_exact_where_no_exp_is_involved(vk: VulkanRuntime) -> None:
    """Sinkhorn over identical logits: every exp is exp(0) = 1, so the device must
    reproduce the reference's rounding order exactly (a reordered sum would show)."""
    n_hc, dim = 4, 64
    width = split_width(n_hc)
    streams = np.random.default_rng(1).standard_normal((2, n_hc, dim)).astype(np.float32)
    fn = np.zeros((width, n_hc * dim), np.float32)
    w = upload_weights(fn.view(np.uint8), GGMLType.F32, n_hc * dim, rt=vk)
    scale = np.ones(3, np.float32)
    base = np.concatenate([np.zeros(2 * n_hc), np.full(n_hc * n_hc, 0.3)]).astype(np.float32)
    _, split = hc_pre(streams, w, scale, base, iters=20, hc_eps=1e-6, rms_eps=1e-6)
    ref = hc_split(np.zeros((2, width), np.float32), scale, base, n_hc, 20, 1e-6)
    assert np.array_equal(split[:, 2 * n_hc :], ref.comb.reshape(2, -1))
    w.release()


@pytest.mark.parametrize(("n_tok", "n_hc", "dim"), [(1, 4, 256), (4, 4, 33)])
def test_head_collapse_matches_reference(vk: VulkanRuntime, n_tok: int, n_hc: int,
                                         dim: int) -> None:  # fmt: skip
    streams, fn, scale, base = _inputs(n_tok, n_hc, dim, HEAD, seed=7)
    base[0] = -30.0  # the stable sigmoid's negative branch
    w = upload_weights(fn.view(np.uint8), GGMLType.F32, n_hc * dim, rt=vk)
    x, pre = hc_pre(streams, w, scale, base, iters=0, hc_eps=1e-6, rms_eps=1e-6, mode=HEAD)
    ref_pre = head_weights(_ref_mix(streams, fn, 1e-6), scale, base, 1e-6)
    assert np.all(np.abs(pre - ref_pre) <= REL * np.abs(ref_pre))
    ref_x = weighted_streams(streams, ref_pre)
    bound = np.einsum("th,thd->td", np.abs(ref_pre), np.abs(streams))
    assert np.all(np.abs(x - ref_x) <= REL * bound)
    w.release()


@pytest.mark.parametrize(("n_tok", "n_hc", "dim"), [(1, 4, 64), (3, 4, 130), (2, 3, 1)])
def test_hc_post_matches_reference_bit_for_bit(vk: VulkanRuntime, n_tok: int, n_hc: int,
                                               dim: int) -> None:  # fmt: skip
    rng = np.random.default_rng(dim)
    streams = rng.standard_normal((n_tok, n_hc, dim)).astype(np.float32)
    y = rng.standard_normal((n_tok, dim)).astype(np.float32)
    mix = rng.standard_normal((n_tok, split_width(n_hc))).astype(np.float32)
    ref = hc_split(mix, np.ones(3, np.float32), np.zeros(split_width(n_hc), np.float32),
                   n_hc, 20, 1e-6)  # fmt: skip
    split = np.concatenate([ref.pre, ref.post, ref.comb.reshape(n_tok, -1)], axis=1)
    got = hc_post(y, streams, split, vk)
    want = ref_hc_post(y, streams, ref)
    assert np.array_equal(got, want)


def test_bad_shapes_are_refused(vk: VulkanRuntime) -> None:
    with pytest.raises(Ds4Error, match="streams"):
        hc_post(np.zeros((1, 4)), np.zeros((1, 9, 4)), np.zeros((1, 99)), vk)
