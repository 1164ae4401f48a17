"""SIMD kernels == scalar kernels up to f32 accumulation order.

Stated tolerance: |simd - scalar| <= 1e-5 * sum_i |w_i * xq_i| per output, where w is the
dequantized weight row and xq the quantized (or f32) activation: about 170 ulps of the
magnitude sum, far below one activation code step (~1/127 relative), so any error in the
integer parts would fail it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from tests.unit.cpu_kernels.kernel_blocks import (
    ALL_TYPES,
    FLOAT_TYPES,
    QUANT_TYPES,
    edge_activations,
    quant_rows,
    weight_rows,
)

from ds4.adapters.compute.cpu_kernels import available_impls, matvec
from ds4.adapters.compute.cpu_kernels_reference import float_weights
from ds4.adapters.quant.numpy_codec import NumpyDequantizer
from ds4.domain.engine_math.quant_dots import quantize_q8_0, quantize_q8_k
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.quant_formats import FORMATS_BY_TYPE

SIMD = [impl for impl in available_impls() if impl not in ("auto", "scalar")]
pytestmark = pytest.mark.skipif(not SIMD, reason="no SIMD kernels on this CPU")
COLS = 1024
RTOL = 1e-5


def _per32(ggml_type: GGMLType) -> bool:
    return FORMATS_BY_TYPE[ggml_type].activation == "q8_0"


def magnitude_sum(
    raw: npt.NDArray[np.uint8], ggml_type: GGMLType, x: npt.NDArray[np.float32]
) -> npt.NDArray[np.float64]:
    if ggml_type in FLOAT_TYPES:
        w, xq = float_weights(raw, ggml_type), x
    else:
        w = NumpyDequantizer().dequantize(raw, ggml_type)
        act = quantize_q8_0(x) if _per32(ggml_type) else quantize_q8_k(x)
        xq = (act.codes * act.scales[..., None]).reshape(-1)[: x.shape[0]]
    out: npt.NDArray[np.float64] = np.abs(w.astype(np.float64)) @ np.abs(xq.astype(np.float64))
    return out


@pytest.mark.parametrize("impl", SIMD)
@pytest.mark.parametrize("ggml_type", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("seed", range(3))
def test_simd_within_rounding_noise_of_scalar(impl: str, ggml_type: GGMLType, seed: int) -> None:
    raw = weight_rows(ggml_type, 40, COLS, seed=seed)
    x = edge_activations(COLS, seed=seed)[seed % 2]  # normal, then with 3e38 spikes
    if seed == 1:
        x = x / np.float32(1e30)  # keep the spikes finite through the products
    scalar = matvec(raw, ggml_type, x, impl="scalar")
    simd = matvec(raw, ggml_type, x, impl=impl)
    bound = RTOL * magnitude_sum(raw, ggml_type, x)
    assert np.all(np.abs(simd.astype(np.float64) - scalar) <= bound)
    assert not np.array_equal(bound, np.zeros_like(bound))


@pytest.mark.parametrize("impl", SIMD)
@pytest.mark.parametrize("ggml_type", QUANT_TYPES, ids=lambda t: t.name)
def test_simd_handles_the_minus_128_code(impl: str, ggml_type: GGMLType) -> None:
    """All-denormal activation blocks overflow 1/d and quantize to -128/127 codes; the
    SIMD sign tricks cannot negate -128, so those activations take the scalar kernel."""
    raw = quant_rows(ggml_type, 16, COLS, seed=5)
    x = np.random.default_rng(6).standard_normal(COLS).astype(np.float32)
    x[:256] = np.float32(1e-39) * np.sign(x[:256] + np.float32(0.5))  # no zeros
    with np.errstate(over="ignore"):
        codes = (quantize_q8_0(x) if _per32(ggml_type) else quantize_q8_k(x)).codes
    assert codes.min() == -128
    scalar = matvec(raw, ggml_type, x, impl="scalar")
    assert np.array_equal(matvec(raw, ggml_type, x, impl=impl), scalar)
