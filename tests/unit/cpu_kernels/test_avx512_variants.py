"""The AVX-512 kernel set (docs/adr/0060-avx512-kernels-and-pool-spin.md,
docs/adr/0062-multi-row-decode-kernels.md): the Q2_K row kernel within the stated
rounding bound of scalar at block-boundary lengths, the multi-row decode kernels
bit-identical to the row kernels (Q2_K: its own; Q8_0: the AVX2 one) for every group
remainder and thread count, the Q8_0 prefill tile bit-identical to the AVX2 row kernel
for every rows / tokens / blocks remainder, -128 codes routed to scalar inside a batch,
and the pool's spin setting."""

from __future__ import annotations

import numpy as np
import pytest
from tests.unit.cpu_kernels.kernel_blocks import quant_rows, same_bits
from tests.unit.cpu_kernels.test_simd_agreement import RTOL, magnitude_sum
from tests.unit.cpu_kernels.tile_checks import assert_tile_equals_row_kernel

from ds4.adapters.compute import cpu_kernels as ck
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType

pytestmark = pytest.mark.skipif(
    "avx512" not in ck.available_impls(), reason="no AVX-512 VBMI/VNNI/GFNI on this CPU"
)
Q8, Q2K = GGMLType.Q8_0, GGMLType.Q2_K


def test_auto_picks_avx512_where_available() -> None:
    assert ck.best_impl() == "avx512"


@pytest.mark.parametrize("cols", [256, 512, 768, 2048])
@pytest.mark.parametrize("rows", [1, 3, 17])
def test_q2k_row_kernel_within_bound_of_scalar(cols: int, rows: int) -> None:
    raw = quant_rows(Q2K, rows, cols, seed=cols + rows)
    x = np.random.default_rng(rows).standard_normal(cols).astype(np.float32)
    scalar = ck.matvec(raw, Q2K, x, impl="scalar")
    for impl in ("avx2", "avx512"):
        simd = ck.matvec(raw, Q2K, x, impl=impl)
        assert np.all(np.abs(simd.astype(np.float64) - scalar) <= RTOL * magnitude_sum(raw, Q2K, x))
    # the integer sums are exact: an edge row (all-max codes and scales) is no exception
    edge = quant_rows(Q2K, 4, cols, seed=1, edge=True)
    bound = RTOL * magnitude_sum(edge, Q2K, x)
    diff = ck.matvec(edge, Q2K, x, impl="avx512").astype(np.float64) - ck.matvec(
        edge, Q2K, x, impl="scalar"
    )
    assert np.all(np.abs(diff) <= bound)


@pytest.mark.parametrize("cols", [256, 512, 768])
@pytest.mark.parametrize("rows", [4, 5, 7, 8, 13])
def test_q2k_multi_row_kernel_equals_the_row_kernel(cols: int, rows: int) -> None:
    """A matvec runs rows in groups of 4 (the rest through the row kernel); a one-row
    matvec runs the row kernel. Every row's result is the same bits either way, for any
    thread count, and within the bound of scalar (1..3 blocks, group remainders 0..3)."""
    raw = quant_rows(Q2K, rows, cols, seed=7 * cols + rows)
    x = np.random.default_rng(cols + rows).standard_normal(cols).astype(np.float32)
    grouped = [ck.matvec(raw, Q2K, x, threads=n, impl="avx512") for n in (1, 2, 3)]
    assert same_bits(grouped[0], grouped[1]) and same_bits(grouped[0], grouped[2])
    one_by_one = np.concatenate(
        [ck.matvec(raw[r : r + 1], Q2K, x, impl="avx512") for r in range(rows)]
    )
    assert same_bits(grouped[0], one_by_one)
    scalar = ck.matvec(raw, Q2K, x, impl="scalar")
    bound = RTOL * magnitude_sum(raw, Q2K, x)
    assert np.all(np.abs(grouped[0].astype(np.float64) - scalar) <= bound)
    edge = quant_rows(Q2K, rows, cols, seed=2, edge=True)  # all-max codes and scales
    diff = ck.matvec(edge, Q2K, x, impl="avx512").astype(np.float64) - ck.matvec(
        edge, Q2K, x, impl="scalar"
    )
    assert np.all(np.abs(diff) <= RTOL * magnitude_sum(edge, Q2K, x))


@pytest.mark.parametrize("cols", [32, 64, 96, 160, 1024])
@pytest.mark.parametrize("rows", [1, 3, 4, 6, 9])
def test_q8_0_multi_row_decode_is_bit_identical_to_avx2(cols: int, rows: int) -> None:
    """Decode takes 4 rows at a time; each output equals the AVX2 row kernel's bits (so
    a token decoded alone equals the same token in a prefill tile), any thread count."""
    raw = quant_rows(Q8, rows, cols, seed=cols * 3 + rows)
    x = np.random.default_rng(rows).standard_normal(cols).astype(np.float32)
    avx2 = ck.matvec(raw, Q8, x, impl="avx2")
    for n in (1, 2, 3):
        assert same_bits(ck.matvec(raw, Q8, x, threads=n, impl="avx512"), avx2)
    # fewer than 4 tokens: no tile, every token through the multi-row kernel
    xs = np.random.default_rng(rows + 1).standard_normal((3, cols)).astype(np.float32)
    batch = ck.matmul(raw, Q8, xs, impl="avx512")
    assert all(same_bits(batch[t], ck.matvec(raw, Q8, xs[t], impl="avx2")) for t in range(3))


@pytest.mark.parametrize("cols", [32, 64, 96, 160, 1024])
@pytest.mark.parametrize("rows", [1, 4, 5, 11])
@pytest.mark.parametrize("n_tok", [4, 6, 9])
def test_q8_0_tile_is_bit_identical_to_the_row_kernel(cols: int, rows: int, n_tok: int) -> None:
    """Whole 4x4 tiles, left-over rows and tokens, an odd last block: every output equals
    the AVX2 row kernel's (the tile reproduces its arithmetic), so a token's result does
    not depend on its batch."""
    raw = quant_rows(Q8, rows, cols, seed=cols * rows + n_tok)
    x = np.random.default_rng(n_tok).standard_normal((n_tok, cols)).astype(np.float32)
    assert_tile_equals_row_kernel(raw, Q8, x)


def test_q8_0_tile_threads_do_not_change_results() -> None:
    raw = quant_rows(Q8, 70, 512, seed=3)
    x = np.random.default_rng(4).standard_normal((8, 512)).astype(np.float32)
    results = [ck.matmul(raw, Q8, x, threads=n, impl="avx512") for n in (1, 2, 3)]
    assert same_bits(results[0], results[1]) and same_bits(results[0], results[2])


def test_minus_128_token_in_a_batch_takes_scalar() -> None:
    raw = quant_rows(Q8, 9, 256, seed=7)
    x = np.random.default_rng(8).standard_normal((5, 256)).astype(np.float32)
    x[2, :32] = np.float32(1e-39) * np.sign(x[2, :32] + np.float32(0.5))  # -128 codes
    with np.errstate(over="ignore"):
        y = ck.matmul(raw, Q8, x, impl="avx512")
        assert same_bits(y[2], ck.matvec(raw, Q8, x[2], impl="scalar"))
    for t in (0, 1, 3, 4):
        assert same_bits(y[t], ck.matvec(raw, Q8, x[t], impl="avx2"))


def test_pool_spin_keeps_results_and_checks_its_range() -> None:
    raw = quant_rows(Q8, 300, 1024, seed=9)
    x = np.random.default_rng(10).standard_normal((3, 1024)).astype(np.float32)
    quiet = ck.matmul(raw, Q8, x, threads=2)
    try:
        ck.set_pool_spin_us(50)
        spun = [ck.matmul(raw, Q8, x, threads=n) for n in (2, 3, 2)]
    finally:
        ck.set_pool_spin_us(0)
    assert all(same_bits(quiet, s) for s in spun)
    for bad in (-1, 10001):
        with pytest.raises(Ds4Error, match="pool spin"):
            ck.set_pool_spin_us(bad)
