"""Quantizer byte identity: Q8_0/BF16 vs gguf-py, F16 vs numpy, native C vs numpy reference."""

from __future__ import annotations

import gguf.quants
import numpy as np
import numpy.typing as npt
import pytest
from gguf import GGMLQuantizationType
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ds4.adapters.quant.native_codec import NativeQuantizer
from ds4.adapters.quant.numpy_codec import QUANTIZABLE, NumpyQuantizer
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType

F32 = npt.NDArray[np.float32]
REFERENCE = NumpyQuantizer()
NATIVE = NativeQuantizer()
TYPES = sorted(QUANTIZABLE, key=int)
SEARCHED = [GGMLType.Q2_K, GGMLType.Q4_K, GGMLType.IQ2_XXS]


def _scaled(seed: int, scale: float, shape: tuple[int, int] = (4, 512)) -> F32:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _cases() -> dict[str, F32]:
    rng = np.random.default_rng(42)
    spike = np.zeros((2, 512), np.float32)
    spike[0, 300] = 5.0
    spike[1, 7] = -1e-3
    signed_zeros = np.where(rng.random((2, 512)) < 0.5, -0.0, 0.0).astype(np.float32)
    mixed = _scaled(5, 1.0) * (10.0 ** np.repeat(np.arange(-8, 8), 128)[None, :512]).astype(
        np.float32
    )
    return {
        "gaussian": _scaled(1, 1.0, (8, 1024)),
        "student_t3": rng.standard_t(3, (8, 1024)).astype(np.float32),
        "zeros": np.zeros((2, 512), np.float32),
        "constant": np.full((2, 512), 0.37, np.float32),
        "negative_constant": np.full((2, 512), -2.5, np.float32),
        "spike": spike,
        "signed_zeros": signed_zeros,
        "huge": _scaled(2, 1e30),
        "f16_range": _scaled(3, 3e4),
        "tiny": _scaled(4, 1e-30),
        "denormal": _scaled(6, 1e-41),
        "mixed_magnitudes": mixed,
        "sparse": _scaled(7, 1.0) * (rng.random((4, 512)) < 0.05),
        "positive_only": np.abs(_scaled(8, 2.0)),
    }


CASES = _cases()
IMPORTANCE = np.random.default_rng(9).lognormal(0.0, 1.5, 1024).astype(np.float32)


@pytest.mark.parametrize("case", sorted(CASES))
def test_q8_0_is_byte_identical_to_gguf(case: str) -> None:
    x = CASES[case]
    with np.errstate(all="ignore"):
        expected = gguf.quants.quantize(x, GGMLQuantizationType.Q8_0)
    assert np.array_equal(REFERENCE.quantize(x, GGMLType.Q8_0), expected)


def test_bf16_is_byte_identical_to_gguf_on_every_kind_of_bit_pattern() -> None:
    rng = np.random.default_rng(0)
    patterns = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    specials = np.array([0x7F800000, 0xFF800000, 0x7FC00001, 0xFFFFFFFF, 0x7F7FFFFF, 1, 0x8000])
    x = np.concatenate([patterns, specials.astype(np.uint32)]).view(np.float32).reshape(1, -1)
    got = REFERENCE.quantize(x, GGMLType.BF16)
    expected = gguf.quants.quantize(x, GGMLQuantizationType.BF16).view(np.uint8)
    assert np.array_equal(got, expected)


def test_f16_rounds_like_numpy_and_quiets_nan_as_the_spec_says() -> None:
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, 300_000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32).reshape(1, -1)
    got = REFERENCE.quantize(x, GGMLType.F16).view("<u2")
    finite = ~np.isnan(x)
    with np.errstate(over="ignore"):
        expected = x[finite].astype(np.float16).view(np.uint16)
    assert np.array_equal(got[finite], expected)
    nan_sign = (bits.reshape(1, -1)[~finite] >> 16) & 0x8000
    assert np.array_equal(got[~finite], (nan_sign | 0x7E00).astype(np.uint16))


@pytest.mark.parametrize("ggml_type", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "importance"])
def test_native_is_byte_identical_to_numpy(ggml_type: GGMLType, case: str, weighted: bool) -> None:
    x = CASES[case]
    importance = IMPORTANCE[: x.shape[1]] if weighted else None
    expected = REFERENCE.quantize(x, ggml_type, importance)
    got = NATIVE.quantize(x, ggml_type, importance)
    assert got.shape == expected.shape
    assert np.array_equal(got, expected)


@settings(max_examples=25, deadline=None)
@given(
    ggml_type=st.sampled_from([*SEARCHED, GGMLType.Q8_0]),
    values=hnp.arrays(
        np.float32,
        (1, 256),
        elements=st.floats(-1e6, 1e6, width=32, allow_subnormal=True),
    ),
    importance=st.none() | hnp.arrays(np.float32, (256,), elements=st.floats(0, 1e4, width=32)),
)
def test_native_equals_numpy_on_arbitrary_blocks(
    ggml_type: GGMLType, values: F32, importance: F32 | None
) -> None:
    expected = REFERENCE.quantize(values, ggml_type, importance)
    assert np.array_equal(NATIVE.quantize(values, ggml_type, importance), expected)


@pytest.mark.parametrize("ggml_type", SEARCHED, ids=lambda t: t.name)
def test_threads_and_row_grouping_do_not_change_the_bytes(ggml_type: GGMLType) -> None:
    x = _scaled(11, 1.0, (7, 512))
    whole = NativeQuantizer(threads=3).quantize(x, ggml_type, IMPORTANCE[:512])
    row_by_row = np.stack([NATIVE.quantize(r, ggml_type, IMPORTANCE[:512]) for r in x])
    assert np.array_equal(whole, row_by_row)


@pytest.mark.parametrize("ggml_type", TYPES, ids=lambda t: t.name)
def test_leading_axes_are_kept_and_sizes_follow_the_type_math(ggml_type: GGMLType) -> None:
    x = _scaled(12, 1.0, (6, 512)).reshape(2, 3, 512)
    geo = BLOCK_GEOMETRY[ggml_type]
    for quantizer in (REFERENCE, NATIVE):
        out = quantizer.quantize(x, ggml_type)
        assert out.dtype == np.uint8
        assert out.shape == (2, 3, 512 // geo.elements * geo.nbytes)


def test_q8_0_ignores_importance_and_zero_blocks_encode_as_zero_bytes() -> None:
    x = CASES["gaussian"]
    assert np.array_equal(
        REFERENCE.quantize(x, GGMLType.Q8_0, IMPORTANCE),
        REFERENCE.quantize(x, GGMLType.Q8_0),
    )
    for ggml_type in (GGMLType.Q8_0, GGMLType.Q2_K, GGMLType.Q4_K, GGMLType.IQ2_XXS):
        assert not NATIVE.quantize(CASES["zeros"], ggml_type).any(), ggml_type.name


def _mxfp4_edges() -> F32:
    """Blocks gguf-py's MXFP4 treats specially: zero, subnormal and near-subnormal amax
    (the scale byte wraps), the float32 maximum (log2 rounds up), exact ties between two
    codes, powers of two and their neighbours one ulp below."""
    one_below = np.nextafter(np.float32(2.0) ** np.arange(-130, 128, 4), np.float32(0))
    rows = [
        np.zeros(32),
        np.full(32, 1e-45),
        np.linspace(-1e-39, 1e-39, 32),
        np.full(32, 2.0**-126),
        np.full(32, 2.0**-125),
        np.linspace(-3.4e38, 3.4e38, 32),
        np.arange(32) * 0.25,  # multiples of half a step: ties
        -np.arange(32) * 0.75,
        np.resize(one_below, 32),
        np.resize(np.float32(2.0) ** np.arange(-40, 40, 3), 32),
    ]
    return np.stack([np.asarray(r, dtype=np.float32) for r in rows])


@pytest.mark.parametrize("case", [*sorted(CASES), "mxfp4_edges"])
def test_mxfp4_is_byte_identical_to_gguf(case: str) -> None:
    x = _mxfp4_edges() if case == "mxfp4_edges" else CASES[case]
    with np.errstate(all="ignore"):
        expected = gguf.quants.quantize(x, GGMLQuantizationType.MXFP4)
    assert np.array_equal(REFERENCE.quantize(x, GGMLType.MXFP4), expected)
    assert np.array_equal(NATIVE.quantize(x, GGMLType.MXFP4), expected)


def test_mxfp4_blocks_match_gguf_on_every_kind_of_bit_pattern() -> None:
    """The block encoder itself (below the request check, which refuses NaN and
    infinity) gives gguf-py's bytes for NaN, infinite and subnormal values too."""
    from ds4.domain.gguf.mxfp4 import encode_blocks

    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2**32, (20_000, 32), dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x[0, 5], x[1, :], x[2, 9], x[3, 1] = np.nan, np.nan, np.inf, -np.inf
    with np.errstate(all="ignore"):
        expected = gguf.quants.quantize(x, GGMLQuantizationType.MXFP4)
        assert np.array_equal(encode_blocks(x), expected)
