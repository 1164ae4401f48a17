"""The IQ2_XXS group tiles of the AVX2 and AVX-512 sets (docs/adr/0063-iq2-group-tile.md)
and the AVX-512 row kernel: for any group of 1..9 tokens, 1..3 blocks and row counts
that are no multiple of the tile, each output is bit-identical to the AVX2 row kernel
on that token alone (so a token's result does not depend on its group), within the
stated bound of scalar, the same for any thread count, and a token with a -128 code
still takes scalar."""

from __future__ import annotations

import numpy as np
import pytest
from tests.unit.cpu_kernels.kernel_blocks import quant_rows, same_bits
from tests.unit.cpu_kernels.tile_checks import assert_tile_equals_row_kernel

from ds4.adapters.compute import cpu_kernels as ck
from ds4.domain.gguf.ggml_types import GGMLType

IQ2 = GGMLType.IQ2_XXS
TILED = [impl for impl in ("avx2", "avx512") if impl in ck.available_impls()]
pytestmark = pytest.mark.skipif(not TILED, reason="no AVX2 on this CPU")


def tokens(n_tok: int, cols: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n_tok, cols)).astype(np.float32)
    return x * np.float32(4.0)


@pytest.mark.parametrize("impl", TILED)
@pytest.mark.parametrize("n_tok", range(1, 10))
@pytest.mark.parametrize("cols", [256, 512, 768])
def test_tile_is_bit_identical_to_the_row_kernel(impl: str, n_tok: int, cols: int) -> None:
    rows = 3 + 2 * n_tok  # 5..21: whole 8-row tiles and left-over rows
    raw = quant_rows(IQ2, rows, cols, seed=cols + n_tok)
    x = tokens(n_tok, cols, seed=n_tok)
    assert_tile_equals_row_kernel(raw, IQ2, x, impl=impl, threads=1)


@pytest.mark.parametrize("impl", TILED)
def test_edge_blocks_keep_exact_integer_sums(impl: str) -> None:
    """Edge f16 scales, and rows whose index/sign bytes are all 0xff (group scale 31,
    every sign field 127): the int32 lane sums the tile builds from offset codes and a
    weight-only correction equal the row kernel's."""
    raw = quant_rows(IQ2, 11, 768, seed=5, edge=True)
    blocks = raw.reshape(11, 3, 66)
    blocks[::2, :, 2:] = 0xFF
    x = tokens(7, 768, seed=6)
    x[3] = np.float32(127.0)  # every code +127: the largest u8 operand (255)
    x[4] = np.float32(-127.0)
    alone = np.stack([ck.matvec(raw, IQ2, x[t], impl="avx2") for t in range(7)])
    assert same_bits(ck.matmul(raw, IQ2, x, impl=impl), alone)
    if "avx512" in TILED:  # the AVX-512 row kernel (the tile for one token) too
        one = np.stack([ck.matvec(raw, IQ2, x[t], impl="avx512") for t in range(7)])
        assert same_bits(one, alone)


@pytest.mark.parametrize("impl", TILED)
def test_threads_do_not_change_results(impl: str) -> None:
    raw = quant_rows(IQ2, 70, 512, seed=3)
    x = tokens(11, 512, seed=4)
    results = [ck.matmul(raw, IQ2, x, threads=n, impl=impl) for n in (1, 2, 3)]
    assert same_bits(results[0], results[1]) and same_bits(results[0], results[2])


@pytest.mark.parametrize("impl", TILED)
def test_minus_128_token_in_a_group_takes_scalar(impl: str) -> None:
    raw = quant_rows(IQ2, 9, 512, seed=7)
    x = tokens(5, 512, seed=8)
    x[2, :256] = np.float32(1e-39) * np.sign(x[2, :256] + np.float32(0.5))  # -128 codes
    with np.errstate(over="ignore"):
        y = ck.matmul(raw, IQ2, x, impl=impl)
        assert same_bits(y[2], ck.matvec(raw, IQ2, x[2], impl="scalar"))
    for t in (0, 1, 3, 4):
        assert same_bits(y[t], ck.matvec(raw, IQ2, x[t], impl="avx2"))
