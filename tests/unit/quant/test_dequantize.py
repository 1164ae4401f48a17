"""Dequantizers: numpy bit-identical to gguf-py, native C bit-identical to numpy."""

from __future__ import annotations

import gguf.quants
import numpy as np
import numpy.typing as npt
import pytest
from gguf import GGMLQuantizationType

from ds4.adapters.quant.native_codec import NativeDequantizer
from ds4.adapters.quant.numpy_codec import NumpyDequantizer
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType
from ds4.domain.gguf.quant_formats import DEQUANTIZABLE

QUANT_TYPES = sorted(DEQUANTIZABLE, key=int)
# Offsets of the f16 scale fields in each block, so edge-case scales can be planted.
SCALE_FIELDS = {
    GGMLType.Q8_0: (0,),
    GGMLType.Q2_K: (80, 82),
    GGMLType.Q4_K: (0, 2),
    GGMLType.IQ2_XXS: (0,),
    GGMLType.Q3_K: (108,),
    GGMLType.Q5_K: (0, 2),
    GGMLType.Q6_K: (208,),
    GGMLType.IQ4_NL: (0,),
    GGMLType.IQ4_XS: (0,),
    GGMLType.IQ2_XS: (0,),
    GGMLType.IQ3_XXS: (0,),
    GGMLType.IQ3_S: (0,),
}
EDGE_SCALES = np.array(
    [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0x1400],
    dtype="<u2",
)  # zero, -zero, smallest denormal (+-), largest denormal, smallest normal, +-65504, 1, tiny


def bits(a: npt.NDArray[np.float32]) -> npt.NDArray[np.uint32]:
    return np.ascontiguousarray(a).view(np.uint32)


def random_raw(ggml_type: GGMLType, n_blocks: int, seed: int) -> npt.NDArray[np.uint8]:
    geo = BLOCK_GEOMETRY[ggml_type]
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n_blocks, geo.nbytes), dtype=np.uint8)


def with_edge_scales(raw: npt.NDArray[np.uint8], ggml_type: GGMLType) -> npt.NDArray[np.uint8]:
    out = raw.copy()
    for field in SCALE_FIELDS.get(ggml_type, ()):
        picks = EDGE_SCALES[np.arange(len(out)) % len(EDGE_SCALES)]
        out[:, field : field + 2] = picks.view(np.uint8).reshape(-1, 2)
    return out


def finite_scales(raw: npt.NDArray[np.uint8], ggml_type: GGMLType) -> npt.NDArray[np.uint8]:
    """Replace scale fields with finite f16 values (random bytes are often NaN/inf)."""
    out = raw.copy()
    rng = np.random.default_rng(1)
    for field in SCALE_FIELDS.get(ggml_type, ()):
        scales = (rng.standard_normal(len(out)) * 0.05).astype("<f2")
        out[:, field : field + 2] = scales.view(np.uint8).reshape(-1, 2)
    return out


@pytest.mark.parametrize("ggml_type", QUANT_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("variant", ["random", "edge", "finite"])
def test_numpy_matches_gguf_bit_for_bit(ggml_type: GGMLType, variant: str) -> None:
    raw = random_raw(ggml_type, 4000 if ggml_type in SCALE_FIELDS else 64, seed=int(ggml_type))
    if variant == "edge":
        raw = with_edge_scales(raw, ggml_type)
    elif variant == "finite":
        raw = finite_scales(raw, ggml_type)
    rows = raw.reshape(8, -1)
    ours = NumpyDequantizer().dequantize(rows, ggml_type)
    with np.errstate(all="ignore"):
        theirs = gguf.quants.dequantize(rows, GGMLQuantizationType(int(ggml_type)))
    assert ours.shape == theirs.shape
    assert ours.dtype == np.float32
    np.testing.assert_array_equal(bits(ours), bits(theirs.astype(np.float32)))


@pytest.mark.parametrize("ggml_type", QUANT_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("variant", ["random", "edge"])
def test_native_matches_numpy_bit_for_bit(ggml_type: GGMLType, variant: str) -> None:
    raw = random_raw(ggml_type, 2000, seed=100 + int(ggml_type))
    if variant == "edge":
        raw = with_edge_scales(raw, ggml_type)
    rows = raw.reshape(4, 5, -1)  # leading axes are kept
    ours = NumpyDequantizer().dequantize(rows, ggml_type)
    native = NativeDequantizer().dequantize(rows, ggml_type)
    assert native.shape == ours.shape
    np.testing.assert_array_equal(bits(native), bits(ours))


def test_every_f16_pattern_converts_exactly() -> None:
    raw = np.arange(65536, dtype="<u2").view(np.uint8).reshape(1, -1)
    ours = NumpyDequantizer().dequantize(raw, GGMLType.F16)
    native = NativeDequantizer().dequantize(raw, GGMLType.F16)
    want = np.arange(65536, dtype="<u2").view("<f2").astype(np.float32).reshape(1, -1)
    np.testing.assert_array_equal(bits(ours), bits(want))
    np.testing.assert_array_equal(bits(native), bits(want))


def test_known_q8_0_block_values() -> None:
    block = np.zeros(34, dtype=np.uint8)
    block[0:2] = np.array([0.5], dtype="<f2").view(np.uint8)
    block[2:] = np.arange(-16, 16, dtype=np.int8).view(np.uint8)
    out = NumpyDequantizer().dequantize(block.reshape(1, -1), GGMLType.Q8_0)
    np.testing.assert_array_equal(out[0], np.arange(-16, 16, dtype=np.float32) * 0.5)


@pytest.mark.parametrize("backend", [NumpyDequantizer(), NativeDequantizer()])
def test_partial_blocks_and_unsupported_types_are_errors(
    backend: NumpyDequantizer | NativeDequantizer,
) -> None:
    with pytest.raises(Ds4Error, match="whole number of blocks"):
        backend.dequantize(np.zeros((1, 35), dtype=np.uint8), GGMLType.Q8_0)
    with pytest.raises(Ds4Error, match="not supported"):
        backend.dequantize(np.zeros((1, 18), dtype=np.uint8), GGMLType.Q4_0)
