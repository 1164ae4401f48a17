"""ds4-numerics Vulkan products (integer dots on host-quantized activations) == the cpu
scalar kernels (bit-identical to the numpy reference) up to the f32 order of the block sum:
|y - y_cpu| <= 1e-5 * sum |w x| per output (w: the reference decoding of the blocks)."""

from __future__ import annotations

import numpy as np
import pytest
from tests.unit.cpu_kernels.kernel_blocks import quant_rows
from tests.unit.vulkan.reference import dequantized

from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.adapters.compute.vulkan.weights import matmul_q8, upload_weights
from ds4.domain.engine_math import quant_dots
from ds4.domain.engine_math.quant_dots import quantize_q8_0, quantize_q8_k
from ds4.domain.gguf.ggml_types import GGMLType

DOTS = {
    GGMLType.Q8_0: (quant_dots.dot_q8_0, quantize_q8_0),
    GGMLType.Q2_K: (quant_dots.dot_q2_k, quantize_q8_k),
    GGMLType.Q4_K: (quant_dots.dot_q4_k, quantize_q8_k),
    GGMLType.IQ2_XXS: (quant_dots.dot_iq2_xxs, quantize_q8_k),
    GGMLType.MXFP4: (quant_dots.dot_mxfp4, quantize_q8_0),
    GGMLType.Q3_K: (quant_dots.dot_q3_k, quantize_q8_k),
    GGMLType.Q5_K: (quant_dots.dot_q5_k, quantize_q8_k),
    GGMLType.Q6_K: (quant_dots.dot_q6_k, quantize_q8_k),
    GGMLType.IQ4_NL: (quant_dots.dot_iq4_nl, quantize_q8_0),
    GGMLType.IQ4_XS: (quant_dots.dot_iq4_xs, quantize_q8_k),
    GGMLType.IQ2_XS: (quant_dots.dot_iq2_xs, quantize_q8_k),
    GGMLType.IQ3_XXS: (quant_dots.dot_iq3_xxs, quantize_q8_k),
    GGMLType.IQ3_S: (quant_dots.dot_iq3_s, quantize_q8_k),
}


@pytest.mark.parametrize("t", list(DOTS), ids=lambda t: t.name)
@pytest.mark.parametrize("rows,blocks,n_tok", [(1, 1, 1), (37, 2, 3), (70, 3, 1)])
def test_integer_dots_agree_with_the_reference(
    vk_any: VulkanRuntime, t: GGMLType, rows: int, blocks: int, n_tok: int
) -> None:
    cols = (32 if DOTS[t][1] is quantize_q8_0 else 256) * blocks
    raw = quant_rows(t, rows, cols, seed=rows)
    x = np.random.default_rng(blocks).standard_normal((n_tok, cols)).astype(np.float32)
    dot, quantize = DOTS[t]
    want = np.stack([dot(raw, quantize(xt)) for xt in x])
    w = upload_weights(raw, t, cols, rt=vk_any)
    got = matmul_q8(w, x)
    bound = 1e-5 * (np.abs(x.astype(np.float64)) @ np.abs(dequantized(raw, t, rows, cols)).T)
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound + 1e-30)
    w.release()
