"""The F16 prefill tile of the AVX-512 set (docs/adr/0063-iq2-group-tile.md): whole 4x4
tiles, left-over rows and tokens, a lone 8-value chunk and a scalar tail: every output
equals the AVX2 row kernel's bit for bit (so a token's result does not depend on its
batch), within the stated bound of scalar, for any thread count."""

from __future__ import annotations

import numpy as np
import pytest
from tests.unit.cpu_kernels.kernel_blocks import float_rows, same_bits
from tests.unit.cpu_kernels.tile_checks import assert_tile_equals_row_kernel

from ds4.adapters.compute import cpu_kernels as ck
from ds4.domain.gguf.ggml_types import GGMLType

pytestmark = pytest.mark.skipif(
    "avx512" not in ck.available_impls(), reason="no AVX-512 VBMI/VNNI on this CPU"
)
F16 = GGMLType.F16


@pytest.mark.parametrize("cols", [8, 16, 24, 37, 512, 4120])
@pytest.mark.parametrize("rows", [1, 4, 5, 11])
@pytest.mark.parametrize("n_tok", [4, 6, 9])
def test_f16_tile_is_bit_identical_to_the_row_kernel(cols: int, rows: int, n_tok: int) -> None:
    raw = float_rows(F16, rows, cols, seed=cols * rows + n_tok)
    x = np.random.default_rng(n_tok).standard_normal((n_tok, cols)).astype(np.float32)
    assert_tile_equals_row_kernel(raw, F16, x)


def test_f16_tile_threads_do_not_change_results() -> None:
    raw = float_rows(F16, 70, 512, seed=3)
    x = np.random.default_rng(4).standard_normal((8, 512)).astype(np.float32)
    results = [ck.matmul(raw, F16, x, threads=n, impl="avx512") for n in (1, 2, 3)]
    assert same_bits(results[0], results[1]) and same_bits(results[0], results[2])
