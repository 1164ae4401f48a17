"""Q3_K, Q5_K, Q6_K dots: every instruction set this CPU runs gives the scalar kernel's
bits (its AVX2 kernels reduce each block's integer sum exactly and scale it with the
scalar f32 operations, as the NEON ones do under tools/cross/neon_check.sh), on odd row
counts, odd block counts, edge scales and activations holding -128 codes; the scalar
kernel is the numpy reference (quant_dots) bit for bit. Also: the encoders' error."""

from __future__ import annotations

import numpy as np
import pytest
from tests.unit.cpu_kernels.kernel_blocks import edge_activations, quant_rows, same_bits

from ds4.adapters.compute.cpu_kernels import available_impls, matmul, matvec
from ds4.adapters.compute.cpu_kernels_reference import matvec_reference
from ds4.adapters.quant.numpy_codec import NumpyDequantizer, NumpyQuantizer
from ds4.domain.gguf.ggml_types import GGMLType

NEW = (GGMLType.Q3_K, GGMLType.Q5_K, GGMLType.Q6_K)
IMPLS = [impl for impl in available_impls() if impl != "auto"]


@pytest.mark.parametrize("ggml_type", NEW, ids=lambda t: t.name)
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("rows", "blocks"), [(1, 1), (7, 3), (33, 9)])
def test_every_isa_gives_the_reference_bits(
    ggml_type: GGMLType, impl: str, rows: int, blocks: int
) -> None:
    cols = 256 * blocks
    raw = quant_rows(ggml_type, rows, cols, seed=rows + blocks)
    x = np.random.default_rng(blocks).standard_normal(cols).astype(np.float32)
    ref = matvec_reference(raw, ggml_type, x)
    assert same_bits(matvec(raw, ggml_type, x, impl=impl), ref)


@pytest.mark.parametrize("ggml_type", NEW, ids=lambda t: t.name)
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", range(9))
def test_edge_scales_and_activations(ggml_type: GGMLType, impl: str, case: int) -> None:
    raw = quant_rows(ggml_type, 11, 768, seed=case, edge=True)
    x = edge_activations(768, seed=case)[case]
    with np.errstate(over="ignore", invalid="ignore"):
        ref = matvec_reference(raw, ggml_type, x)
        got = matvec(raw, ggml_type, x, impl=impl)
    assert same_bits(got, ref)


@pytest.mark.parametrize("ggml_type", NEW, ids=lambda t: t.name)
@pytest.mark.parametrize("impl", IMPLS)
def test_prefill_rows_equal_decode_rows(ggml_type: GGMLType, impl: str) -> None:
    raw = quant_rows(ggml_type, 13, 512, seed=4)
    x = np.random.default_rng(5).standard_normal((5, 512)).astype(np.float32)
    x[3, :256] = np.float32(1e-39)  # all-denormal block: codes of -128
    with np.errstate(over="ignore"):
        batch = matmul(raw, ggml_type, x, impl=impl)
        for t in range(5):
            assert same_bits(batch[t], matvec(raw, ggml_type, x[t], impl="scalar"))


@pytest.mark.parametrize(
    ("ggml_type", "bound"), [(GGMLType.Q3_K, 0.22), (GGMLType.Q5_K, 0.045), (GGMLType.Q6_K, 0.025)]
)
def test_encoders_round_trip_within_their_bits(ggml_type: GGMLType, bound: float) -> None:
    """Gaussian rows: relative RMSE 0.198 (Q3_K), 0.036 (Q5_K), 0.019 (Q6_K) measured."""
    x = np.random.default_rng(0).standard_normal((8, 1024)).astype(np.float32)
    y = NumpyDequantizer().dequantize(NumpyQuantizer().quantize(x, ggml_type), ggml_type)
    rel = float(np.sqrt(np.mean((x - y) ** 2) / np.mean(x**2)))
    assert rel < bound
