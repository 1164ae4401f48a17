"""Vulkan quantized matvec/matmul == the reference decoding of the same raw blocks, in fp32.

The contract (tests/unit/vulkan/reference.py): |y - y_ref| <= 1e-4 * sum |w x| per output,
for every weight type the model uses, both reduction variants (subgroup and shared
memory), decode (1 token) and prefill (several tokens, across the 8-token groups) shapes,
rows that are not a multiple of the 64-wide workgroup, and k exactly at block boundaries.
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.unit.cpu_kernels.kernel_blocks import quant_rows, weight_rows
from tests.unit.vulkan.reference import assert_dot_agrees, dequantized

from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.adapters.compute.vulkan.weights import matmul, matvec, upload_weights
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType

TYPES = (GGMLType.F32, GGMLType.F16, GGMLType.Q8_0, GGMLType.Q2_K, GGMLType.Q4_K,
         GGMLType.IQ2_XXS, GGMLType.MXFP4, GGMLType.BF16, GGMLType.Q3_K, GGMLType.Q5_K,
         GGMLType.Q6_K, GGMLType.IQ4_NL, GGMLType.IQ4_XS, GGMLType.IQ2_XS, GGMLType.IQ3_XXS,
         GGMLType.IQ3_S)  # fmt: skip
QUANT = (GGMLType.Q8_0, GGMLType.Q2_K, GGMLType.Q4_K, GGMLType.IQ2_XXS, GGMLType.MXFP4,
         GGMLType.Q3_K, GGMLType.Q5_K, GGMLType.Q6_K, GGMLType.IQ4_NL, GGMLType.IQ4_XS,
         GGMLType.IQ2_XS, GGMLType.IQ3_XXS, GGMLType.IQ3_S)  # fmt: skip


def _block(t: GGMLType) -> int:
    return max(BLOCK_GEOMETRY[t].elements, 32)


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("rows,blocks,n_tok", [(1, 1, 1), (37, 2, 1), (65, 3, 9), (130, 1, 17)])
def test_matmul_agrees_with_reference(
    vk_any: VulkanRuntime, t: GGMLType, rows: int, blocks: int, n_tok: int
) -> None:
    cols = _block(t) * blocks  # k exactly at a block boundary
    raw = weight_rows(t, rows, cols, seed=rows + blocks)
    x = np.random.default_rng(n_tok).standard_normal((n_tok, cols)).astype(np.float32)
    w = upload_weights(raw, t, cols, rt=vk_any)
    try:
        assert_dot_agrees(matmul(w, x), dequantized(raw, t, rows, cols), x)
    finally:
        w.release()


@pytest.mark.parametrize("t", QUANT, ids=lambda t: t.name)
def test_edge_scales_decode_like_the_reference(vk: VulkanRuntime, t: GGMLType) -> None:
    """f16 scales at zero, +-0, denormals, the largest normals: decoded exactly as numpy."""
    rows, cols = 20, 512
    raw = quant_rows(t, rows, cols, seed=3, edge=True)
    if t is GGMLType.MXFP4:  # scale bytes 251+ make 12 * 2^(e-128) products overflow the bound
        scales = raw.reshape(rows, -1, 17)[:, :, 0]
        scales[...] = np.minimum(scales, 250)
    x = (np.random.default_rng(4).standard_normal((2, cols)) * 1e-3).astype(np.float32)
    w = upload_weights(raw, t, cols, rt=vk)
    assert_dot_agrees(matmul(w, x), dequantized(raw, t, rows, cols), x)
    w.release()


@pytest.mark.parametrize("t", (GGMLType.F32, GGMLType.F16, GGMLType.BF16), ids=lambda t: t.name)
def test_float_weights_agree_with_the_cpu_kernels(vk: VulkanRuntime, t: GGMLType) -> None:
    """For float weights the cpu kernels also dot in f32: the two backends agree directly."""
    cpu_kernels = pytest.importorskip("ds4.adapters.compute.cpu_kernels")  # not in a GPU bundle
    rows, cols = 70, 96
    raw = weight_rows(t, rows, cols, seed=9)
    x = np.random.default_rng(1).standard_normal(cols).astype(np.float32)
    cpu = cpu_kernels.matvec(raw, t, x)
    got = matvec(upload_weights(raw, t, cols, rt=vk), x)
    w = dequantized(raw, t, rows, cols)
    scale = np.abs(w) @ np.abs(x.astype(np.float64))
    assert np.all(np.abs(got.astype(np.float64) - cpu) <= 1e-4 * scale)


def test_decode_matvec_equals_one_row_of_matmul(vk: VulkanRuntime) -> None:
    raw = weight_rows(GGMLType.Q4_K, 9, 256, seed=2)
    x = np.random.default_rng(0).standard_normal((3, 256)).astype(np.float32)
    w = upload_weights(raw, GGMLType.Q4_K, 256, rt=vk)
    batch = matmul(w, x)
    for t in range(3):
        assert np.array_equal(matvec(w, x[t]), batch[t])  # same order of operations


def test_bad_inputs_are_clear_errors(vk: VulkanRuntime) -> None:
    raw = weight_rows(GGMLType.Q8_0, 4, 64, seed=1)
    with pytest.raises(Ds4Error, match="do not support Q5_1"):
        upload_weights(raw, GGMLType.Q5_1, 64, rt=vk)
    with pytest.raises(Ds4Error, match="whole 32-value blocks"):
        upload_weights(raw, GGMLType.Q8_0, 60, rt=vk)
    w = upload_weights(raw, GGMLType.Q8_0, 64, rt=vk)
    with pytest.raises(Ds4Error, match="do not fit"):
        matmul(w, np.zeros((2, 32), dtype=np.float32))
    with pytest.raises(Ds4Error, match="one activation vector"):
        matvec(w, np.zeros((2, 64), dtype=np.float32))


@pytest.mark.slow
def test_more_rows_than_one_dispatch_dimension(vk: VulkanRuntime) -> None:
    """70000 rows (> 65535 workgroups in x) spill into the y dimension correctly."""
    rows, cols = 70000, 32
    raw = weight_rows(GGMLType.F16, rows, cols, seed=5)
    x = np.random.default_rng(2).standard_normal((1, cols)).astype(np.float32)
    w = upload_weights(raw, GGMLType.F16, cols, rt=vk)
    assert_dot_agrees(matmul(w, x), dequantized(raw, GGMLType.F16, rows, cols), x)
