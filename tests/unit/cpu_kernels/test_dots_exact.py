"""Scalar native kernels == the numpy statement of the nominal formulas, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from tests.unit.cpu_kernels.kernel_blocks import (
    ALL_TYPES,
    F16_ONE,
    QUANT_TYPES,
    edge_activations,
    quant_rows,
    same_bits,
    set_scales,
    weight_rows,
)

from ds4.adapters.compute.cpu_kernels import matmul, matvec
from ds4.adapters.compute.cpu_kernels_reference import matvec_reference
from ds4.adapters.quant.numpy_codec import NumpyDequantizer
from ds4.domain.gguf.ggml_types import GGMLType

COLS = 512


@pytest.mark.parametrize("ggml_type", ALL_TYPES, ids=lambda t: t.name)
def test_scalar_matches_reference_on_random_rows(ggml_type: GGMLType) -> None:
    raw = weight_rows(ggml_type, 24, COLS, seed=int(ggml_type))
    x = np.random.default_rng(1).standard_normal(COLS).astype(np.float32)
    assert same_bits(matvec(raw, ggml_type, x, impl="scalar"), matvec_reference(raw, ggml_type, x))


@pytest.mark.parametrize("ggml_type", QUANT_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("case", range(9))
def test_scalar_matches_reference_on_edge_cases(ggml_type: GGMLType, case: int) -> None:
    """Edge scales (zero, denormal, +-65504) against edge activations (huge, denormal...)."""
    raw = quant_rows(ggml_type, 20, COLS, seed=case, edge=True)
    x = edge_activations(COLS, seed=case)[case]
    with np.errstate(over="ignore", invalid="ignore"):  # inf * 0 is NaN on both sides
        ref = matvec_reference(raw, ggml_type, x)
    assert same_bits(matvec(raw, ggml_type, x, impl="scalar"), ref)


@pytest.mark.parametrize("ggml_type", QUANT_TYPES, ids=lambda t: t.name)
def test_integer_sums_are_exact(ggml_type: GGMLType) -> None:
    """With unit weight scales and integer activations whose quantization scale is exactly
    +-1, the kernel returns the exact integer (or eighths) dot of the dequantized codes."""
    raw = set_scales(quant_rows(ggml_type, 16, COLS, seed=7), ggml_type, np.array([F16_ONE]))
    x = np.random.default_rng(2).integers(-127, 128, COLS).astype(np.float32)
    x[::32] = 127  # every block's max is 127: scale 1 (Q8_0) or -1 (Q8_K), codes = +-x
    w = NumpyDequantizer().dequantize(raw, ggml_type).astype(np.float64)
    exact = w @ x.astype(np.float64)  # integers (eighths for IQ2_XXS), far below 2^24
    assert np.array_equal(matvec(raw, ggml_type, x, impl="scalar").astype(np.float64), exact)
    assert np.array_equal(matvec(raw, ggml_type, x, impl="auto").astype(np.float64), exact)


@pytest.mark.parametrize("ggml_type", ALL_TYPES, ids=lambda t: t.name)
def test_matmul_rows_are_independent_matvecs(ggml_type: GGMLType) -> None:
    raw = weight_rows(ggml_type, 19, COLS, seed=3)
    x = np.random.default_rng(4).standard_normal((5, COLS)).astype(np.float32)
    y = matmul(raw, ggml_type, x, impl="scalar")
    assert y.shape == (5, 19)
    for t in range(5):
        assert same_bits(y[t], matvec_reference(raw, ggml_type, x[t]))
    for impl in ("scalar", "auto"):  # a token's result does not depend on its batch
        y = matmul(raw, ggml_type, x, impl=impl)
        assert same_bits(y[2], matvec(raw, ggml_type, x[2], impl=impl))


def test_strided_row_views_are_read_in_place() -> None:
    raw = quant_rows(GGMLType.Q8_0, 12, COLS, seed=9)
    wide = np.zeros((12, raw.shape[1] + 10), dtype=np.uint8)
    wide[:, 3 : 3 + raw.shape[1]] = raw
    view = wide[::2, 3 : 3 + raw.shape[1]]  # row stride 2 * (row_bytes + 10), not contiguous
    x = np.random.default_rng(0).standard_normal(COLS).astype(np.float32)
    assert same_bits(
        matvec(view, GGMLType.Q8_0, x, impl="scalar"), matvec_reference(raw[::2], GGMLType.Q8_0, x)
    )
