"""Vulkan RMSNorm, RoPE/YaRN and attention with sinks == the engine's numpy functions.

Bounds (fp32 contract): RMSNorm |y - ref| <= 1e-4 * |ref| + 1e-30 per element (the GPU
sums squares in f32, the reference in f64); RoPE is bit-identical (same host tables, the
rotation `precise`); attention |out - ref| <= 1e-4 * max|rows| (the output is a weighted
mean of rows, so that is its natural scale).
"""

from __future__ import annotations

import numpy as np
import pytest

from ds4.adapters.compute.vulkan.attention import attend_with_sinks
from ds4.adapters.compute.vulkan.ops import apply_rope, rmsnorm
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.domain.engine_math import layers as ref_attention
from ds4.domain.engine_math import layers as ref_rope
from ds4.domain.engine_math.layers import rmsnorm as ref_rmsnorm
from ds4.domain.errors import Ds4Error

YARN = ref_rope.Yarn(factor=16.0, orig_ctx=65536, beta_fast=32.0, beta_slow=1.0)


@pytest.mark.parametrize("shape", [(1, 7), (3, 64), (5, 1000), (2, 4096)])
@pytest.mark.parametrize("weighted", [True, False])
def test_rmsnorm_agrees(vk_any: VulkanRuntime, shape: tuple[int, int], weighted: bool) -> None:
    rng = np.random.default_rng(shape[1])
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    w = rng.standard_normal(shape[1]).astype(np.float32) if weighted else None
    got = rmsnorm(x, w, 1e-6, rt=vk_any)
    ref = ref_rmsnorm(x, w, 1e-6)
    assert np.all(np.abs(got - ref) <= 1e-4 * np.abs(ref) + 1e-30)


def test_rmsnorm_of_zeros_is_zero_and_bad_input_is_refused(vk: VulkanRuntime) -> None:
    assert not np.any(rmsnorm(np.zeros((2, 33), np.float32), None, 1e-6, rt=vk))
    with pytest.raises(Ds4Error, match="does not match"):
        rmsnorm(np.ones((2, 8), np.float32), np.ones(4, np.float32), 1e-6, rt=vk)
    with pytest.raises(Ds4Error, match="eps"):
        rmsnorm(np.ones((2, 8), np.float32), None, 0.0, rt=vk)


@pytest.mark.parametrize("yarn", [None, YARN], ids=["plain", "yarn"])
@pytest.mark.parametrize("iterated", [True, False], ids=["ds4", "hf"])
@pytest.mark.parametrize("inverse", [False, True])
def test_rope_is_bit_identical(
    vk: VulkanRuntime, yarn: ref_rope.Yarn | None, iterated: bool, inverse: bool
) -> None:
    rp = ref_rope.RopeParams(n_rot=64, base=10000.0, yarn=yarn)
    positions = np.array([0, 1, 7, 4095, 65535, 200_000], dtype=np.int64)
    x = np.random.default_rng(3).standard_normal((6, 3, 96)).astype(np.float32)
    got = apply_rope(x, positions, rp, iterated=iterated, inverse=inverse, rt=vk)
    angles = ref_rope.rope_angles(positions, rp, iterated=iterated)
    ref = ref_rope.apply_rope(x, angles[:, None, :], 64, inverse=inverse)
    assert np.array_equal(got.view(np.uint32), ref.view(np.uint32))
    assert np.array_equal(got[..., :32], x[..., :32])  # the unrotated head dims stay


def test_rope_refuses_bad_shapes(vk: VulkanRuntime) -> None:
    rp = ref_rope.RopeParams(n_rot=64, base=10000.0, yarn=None)
    with pytest.raises(Ds4Error, match="one position each"):
        apply_rope(np.zeros((2, 1, 64), np.float32), [0], rp, rt=vk)
    with pytest.raises(Ds4Error, match="n_rot"):
        apply_rope(np.zeros((1, 1, 32), np.float32), [0], rp, rt=vk)


@pytest.mark.parametrize(
    "n_head,n_rows,dim", [(1, 1, 8), (4, 37, 64), (8, 130, 128), (2, 300, 512)]
)
def test_attention_with_sinks_agrees(
    vk_any: VulkanRuntime, n_head: int, n_rows: int, dim: int
) -> None:
    rng = np.random.default_rng(n_rows)
    q = rng.standard_normal((n_head, dim)).astype(np.float32)
    rows = rng.standard_normal((n_rows, dim)).astype(np.float32)
    sinks = (rng.standard_normal(n_head) * 2).astype(np.float32)
    scale = 1.0 / np.sqrt(dim)
    got = attend_with_sinks(q, rows, sinks, scale, rt=vk_any)
    ref = ref_attention.attend_with_sinks(q, rows, sinks, scale)
    assert np.all(np.abs(got - ref) <= 1e-4 * np.max(np.abs(rows)))


def test_a_dominant_sink_takes_the_mass(vk: VulkanRuntime) -> None:
    """A sink far above every score leaves (almost) nothing for the rows."""
    q = np.ones((2, 16), np.float32)
    rows = np.ones((5, 16), np.float32)
    out = attend_with_sinks(q, rows, np.array([60.0, -60.0], np.float32), 0.25, rt=vk)
    assert np.all(np.abs(out[0]) < 1e-20)
    assert np.allclose(out[1], 1.0, rtol=1e-6)
    with pytest.raises(Ds4Error, match="do not fit"):
        attend_with_sinks(q, rows[:, :8], np.zeros(2, np.float32), 0.25, rt=vk)
