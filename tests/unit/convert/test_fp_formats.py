"""FP8 E4M3 / FP4 E2M1 / E8M0 decoding of DeepSeek's release formats."""

from __future__ import annotations

import numpy as np
import pytest

from ds4.domain.convert.checkpoint_sources import (
    E2M1_VALUES,
    E4M3_VALUES,
    decode_fp4_groups,
    decode_fp8_tiles,
    e8m0_scales,
)
from ds4.domain.errors import Ds4Error


def test_e4m3_known_codes() -> None:
    assert E4M3_VALUES[0x38] == 1.0  # exponent 7, mantissa 0
    assert E4M3_VALUES[0x7E] == 448.0  # the largest finite value
    assert E4M3_VALUES[0x01] == 2.0**-9  # smallest subnormal
    assert E4M3_VALUES[0x07] == 7 * 2.0**-9  # largest subnormal
    assert E4M3_VALUES[0x08] == 2.0**-6  # smallest normal
    assert E4M3_VALUES[0xB8] == -1.0
    assert E4M3_VALUES[0x7F] == 0.0 and E4M3_VALUES[0xFF] == 0.0  # NaN codes -> 0
    finite = E4M3_VALUES[:127]
    assert (np.diff(finite) > 0).all()  # codes 0..126 are increasing


def test_e2m1_and_e8m0() -> None:
    assert list(E2M1_VALUES[:8]) == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert list(E2M1_VALUES[8:]) == [-v for v in [0, 0.5, 1, 1.5, 2, 3, 4, 6]]
    scales = e8m0_scales(np.array([127, 128, 0, 1, 254], dtype=np.uint8))
    assert list(scales) == [1.0, 2.0, 2.0**-127, 2.0**-126, 2.0**127]
    with pytest.raises(Ds4Error, match="255"):
        e8m0_scales(np.array([255], dtype=np.uint8))


def test_fp8_tiles_scale_each_128x128_block() -> None:
    rows, cols = 200, 300  # ragged last tiles
    codes = np.full((rows, cols), 0x38, dtype=np.uint8)  # every value 1.0
    scale = np.array([[127, 128, 129], [126, 130, 127]], dtype=np.uint8)
    out = decode_fp8_tiles(codes, scale, "w")
    assert out[0, 0] == 1.0 and out[127, 127] == 1.0
    assert out[0, 128] == 2.0 and out[0, 299] == 4.0
    assert out[128, 0] == 0.5 and out[199, 299] == 1.0 and out[150, 130] == 8.0
    with pytest.raises(Ds4Error, match="expected"):
        decode_fp8_tiles(codes, scale[:1], "w")


def test_fp4_low_nibble_first_with_group_scales() -> None:
    packed = np.array([[0x21, 0xF7] * 16], dtype=np.uint8)  # 64 values in one row
    scale = np.array([[127, 128]], dtype=np.uint8)  # group 0 x1, group 1 x2
    out = decode_fp4_groups(packed, scale, "w")
    assert out.shape == (1, 64)
    assert list(out[0, :4]) == [0.5, 1.0, 6.0, -6.0]  # 0x21 -> 1, 2; 0xF7 -> 7, 15
    assert list(out[0, 32:36]) == [1.0, 2.0, 12.0, -12.0]


def test_fp4_groups_repack_into_mxfp4_without_rounding() -> None:
    """Every code under every usable scale byte (0 and 1 subnormal, 254 the largest):
    the MXFP4 blocks decode (numpy and gguf-py) to exactly the FP4 source values."""
    import gguf.quants
    from gguf import GGMLQuantizationType

    from ds4.adapters.quant.numpy_codec import NumpyDequantizer
    from ds4.domain.convert.checkpoint_sources import fp4_as_mxfp4
    from ds4.domain.gguf.ggml_types import GGMLType

    rng = np.random.default_rng(5)
    rows, cols = 255, 96  # one row per scale byte 0..254, three groups a row
    packed = rng.integers(0, 256, (rows, cols // 2), dtype=np.uint8)
    packed[0, :8] = np.arange(0, 256, 17, dtype=np.uint8)[:8]  # code pairs (k, k)
    scale = np.repeat(np.arange(255, dtype=np.uint8)[:, None], cols // 32, axis=1)
    want = decode_fp4_groups(packed, scale, "w")
    blocks = fp4_as_mxfp4(packed, scale, "w")
    assert blocks.shape == (rows, cols // 32 * 17)
    with np.errstate(over="ignore"):
        ours = NumpyDequantizer().dequantize(blocks, GGMLType.MXFP4)
        theirs = gguf.quants.dequantize(blocks, GGMLQuantizationType.MXFP4)
    np.testing.assert_array_equal(ours, want)  # -0 == +0; inf where 6 * 2^127 overflows
    np.testing.assert_array_equal(theirs, want)
    assert np.array_equal(blocks.reshape(-1, 17)[:, 0], scale.reshape(-1))
    with pytest.raises(Ds4Error, match="255"):
        fp4_as_mxfp4(packed[:1], np.full((1, 3), 255, np.uint8), "w")
    with pytest.raises(Ds4Error, match="FP4 scale has shape"):
        fp4_as_mxfp4(packed, scale[:, :2], "w")
