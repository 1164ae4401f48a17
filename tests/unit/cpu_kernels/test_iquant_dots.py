"""The i-quant SIMD dots (native/cpu/cpu_dot_iquant_avx2.c): IQ4_XS, IQ2_XS, IQ3_XXS and
IQ3_S add their blocks in scalar order, so they equal the scalar reference bit for bit;
IQ4_NL keeps the FMA-lane shape and stays within the SIMD bound, its odd block tail
included. Odd row counts and several block counts (tails of the thread split)."""

from __future__ import annotations

import numpy as np
import pytest
from tests.unit.cpu_kernels.kernel_blocks import quant_rows, same_bits
from tests.unit.cpu_kernels.test_simd_agreement import RTOL, SIMD, magnitude_sum

from ds4.adapters.compute.cpu_kernels import matmul, matvec
from ds4.domain.gguf.ggml_types import GGMLType

pytestmark = pytest.mark.skipif(not SIMD, reason="no SIMD kernels on this CPU")
SCALAR_ORDER = (GGMLType.IQ4_XS, GGMLType.IQ2_XS, GGMLType.IQ3_XXS, GGMLType.IQ3_S)


@pytest.mark.parametrize("impl", SIMD)
@pytest.mark.parametrize("ggml_type", SCALAR_ORDER, ids=lambda t: t.name)
@pytest.mark.parametrize("blocks", [1, 3, 8])
def test_scalar_order_kernels_are_bit_identical(
    impl: str, ggml_type: GGMLType, blocks: int
) -> None:
    cols = 256 * blocks
    raw = quant_rows(ggml_type, 37, cols, seed=blocks)
    x = np.random.default_rng(blocks).standard_normal((3, cols)).astype(np.float32)
    assert same_bits(matmul(raw, ggml_type, x, impl=impl), matmul(raw, ggml_type, x, impl="scalar"))


@pytest.mark.parametrize("impl", SIMD)
@pytest.mark.parametrize("blocks", [1, 3, 35])
def test_iq4_nl_odd_block_tails_stay_within_the_bound(impl: str, blocks: int) -> None:
    cols = 32 * blocks
    raw = quant_rows(GGMLType.IQ4_NL, 37, cols, seed=blocks)
    x = np.random.default_rng(blocks).standard_normal(cols).astype(np.float32)
    scalar = matvec(raw, GGMLType.IQ4_NL, x, impl="scalar")
    simd = matvec(raw, GGMLType.IQ4_NL, x, impl=impl)
    bound = RTOL * magnitude_sum(raw, GGMLType.IQ4_NL, x)
    assert np.all(np.abs(simd.astype(np.float64) - scalar) <= bound)
