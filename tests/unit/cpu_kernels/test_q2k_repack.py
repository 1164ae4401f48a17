"""Q2_K rows interleaved by 8 (docs/adr/0067-q2k-row-interleaved-repack.md): the repack
round-trips for every tail size, the AVX-512 kernel over it has the scalar kernel's
integer sums (isum and the mins term, checked with exact-integer scales), stays within
the stated f32 bound of scalar for 1..3 and 8 blocks and edge activations, and gives
the same bits for every thread count; bad shapes and kernel sets are refused."""

from __future__ import annotations

import numpy as np
import pytest
from tests.unit.cpu_kernels.kernel_blocks import edge_activations, quant_rows, same_bits
from tests.unit.cpu_kernels.test_simd_agreement import RTOL, magnitude_sum

from ds4.adapters.compute import cpu_kernels as ck
from ds4.domain.engine_math.quant_dots import quantize_q8_k
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType

Q2K = GGMLType.Q2_K
needs_avx512 = pytest.mark.skipif(
    "avx512" not in ck.available_impls(), reason="no AVX-512 VBMI/VNNI/GFNI on this CPU"
)


@pytest.mark.parametrize("rows", [1, 7, 8, 9, 16, 21])
@pytest.mark.parametrize("cols", [256, 768])
def test_repack_round_trips_and_keeps_tail_rows(rows: int, cols: int) -> None:
    raw = quant_rows(Q2K, rows, cols, seed=rows * cols)
    packed = ck.q2k_x8_repack(raw)
    assert packed.shape == raw.shape
    assert np.array_equal(ck.q2k_x8_unpack(packed), raw)
    tail = rows % 8
    assert np.array_equal(packed[rows - tail :], raw[rows - tail :])  # GGUF layout
    if rows >= 8:
        assert not np.array_equal(packed[:8], raw[:8])  # interleaved


def test_repack_layout_of_one_value() -> None:
    """The byte layout the ADR states: dall / dmin of the 8 rows first, then the scale
    bytes of pair p at 32 + 16p (lane j: row j % 8, sub-block 2p + j // 8), then the
    codes of pair p at 160 + 64p (byte b, bits 2f..2f+1: row (b // 4) % 8, sub-block
    2p + b // 32, value 4f + b % 4 of it)."""
    raw = np.zeros((8, 84), dtype=np.uint8)
    raw[5, 80:82] = [0x00, 0x3C]  # dall of row 5 = 1.0
    raw[5, 3] = 0x9A  # row 5, sub-block 3: scale 10, min 9
    # row 5, value 16 * 3 + 4 * 2 + 1 = 57: half 0, bit pair 1, byte 25 -> code 3
    raw[5, 16 + 25] = 0b1100
    packed = ck.q2k_x8_repack(raw).reshape(-1)
    assert list(packed[10:12]) == [0x00, 0x3C]
    p, j = 1, 8 + 5  # sub-block 3 = 2 * 1 + 1
    assert packed[32 + 16 * p + j] == 0x9A
    b, f = 32 + 4 * 5 + 1, 2  # sub-block 2p + 1, row 5, value 4f + 1
    assert packed[160 + 64 * p + b] == 3 << (2 * f)
    assert np.count_nonzero(packed[160:]) == 1


@needs_avx512
@pytest.mark.parametrize("dall_dmin", [(0x3C00, 0), (0, 0x3C00)])
@pytest.mark.parametrize("rows", [8, 13])
def test_integer_sums_equal_scalar(dall_dmin: tuple[int, int], rows: int) -> None:
    """With activation scale 1 (integer x, amax 127 first) and dall or dmin 1.0 every
    product is an exact integer in f32, so equal outputs mean equal isum / mins sums."""
    cols = 768
    raw = quant_rows(Q2K, rows, cols, seed=rows)
    blocks = raw.reshape(rows, -1, 84)
    blocks[:, :, 80:82] = np.array([dall_dmin[0]], "<u2").view(np.uint8)
    blocks[:, :, 82:84] = np.array([dall_dmin[1]], "<u2").view(np.uint8)
    rng = np.random.default_rng(rows)
    x = rng.integers(-127, 128, cols).astype(np.float32)
    x[::256] = -127
    got = ck.q2k_x8_matvec(ck.q2k_x8_repack(raw), x)
    want = ck.matvec(raw, Q2K, x, impl="scalar")
    assert np.array_equal(got, want)
    assert np.count_nonzero(want) > rows // 2


@needs_avx512
@pytest.mark.parametrize("cols", [256, 512, 768, 2048])
@pytest.mark.parametrize("rows", [1, 8, 11, 24])
def test_within_bound_of_scalar_and_same_bits_for_any_thread_count(cols: int, rows: int) -> None:
    raw = quant_rows(Q2K, rows, cols, seed=3 * cols + rows)
    packed = ck.q2k_x8_repack(raw)
    x = np.random.default_rng(cols - rows).standard_normal(cols).astype(np.float32)
    runs = [ck.q2k_x8_matvec(packed, x, threads=n) for n in (1, 2, 3)]
    assert same_bits(runs[0], runs[1]) and same_bits(runs[0], runs[2])
    scalar = ck.matvec(raw, Q2K, x, impl="scalar")
    bound = RTOL * magnitude_sum(raw, Q2K, x)
    assert np.all(np.abs(runs[0].astype(np.float64) - scalar) <= bound)
    # tail rows run the row kernel on the GGUF bytes: its bits exactly
    tail = rows % 8
    if tail:
        row_kernel = ck.matvec(raw[rows - tail :], Q2K, x, impl="avx512")
        assert same_bits(runs[0][rows - tail :], row_kernel)


@needs_avx512
@pytest.mark.parametrize("case", ["spikes", "edge_scales", "minus_128"])
def test_edge_inputs_within_bound_of_scalar(case: str) -> None:
    """3e38 activation spikes (scaled to keep products finite), edge f16 scales (zero,
    denormal, +-65504), and an all-denormal activation block that quantizes to -128
    codes: the group kernel takes those exactly (no sign trick), the tail rows take the
    scalar kernel."""
    cols, rows = 512, 12
    raw = quant_rows(Q2K, rows, cols, seed=5, edge=case == "edge_scales")
    x = edge_activations(cols, seed=7)[1 if case == "spikes" else 0]
    if case == "spikes":
        x = x / np.float32(1e30)
    if case == "minus_128":
        x = x.copy()
        x[:256] = np.float32(1e-39) * np.sign(x[:256] + np.float32(0.5))
        with np.errstate(over="ignore"):
            assert quantize_q8_k(x).codes.min() == -128
    got = ck.q2k_x8_matvec(ck.q2k_x8_repack(raw), x).astype(np.float64)
    want = ck.matvec(raw, Q2K, x, impl="scalar")
    assert np.all(np.isfinite(want))
    with np.errstate(over="ignore"):  # the reference quantizer's 1/d of the denormal block
        bound = RTOL * magnitude_sum(raw, Q2K, x)
    assert np.all(np.abs(got - want) <= bound)
    if case == "minus_128":
        assert same_bits(got[8:].astype(np.float32), want[8:])


def test_bad_shapes_and_kernel_sets_are_refused() -> None:
    raw = quant_rows(Q2K, 8, 256, seed=1)
    with pytest.raises(Ds4Error, match="Q2_K rows"):
        ck.q2k_x8_repack(raw[:, :80])
    with pytest.raises(Ds4Error, match="Q2_K rows"):
        ck.q2k_x8_repack(raw.astype(np.int16))
    packed = ck.q2k_x8_repack(raw)
    with pytest.raises(Ds4Error, match="x of shape"):
        ck.q2k_x8_matvec(packed, np.zeros(512, np.float32))
    with pytest.raises(Ds4Error, match="kernel implementation not available"):
        ck.q2k_x8_matvec(packed, np.zeros(256, np.float32), impl="scalar")
