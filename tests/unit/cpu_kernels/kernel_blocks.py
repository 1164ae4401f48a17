"""Random and edge-case GGUF weight blocks and activations for the CPU kernel tests."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

QUANT_TYPES = (GGMLType.Q8_0, GGMLType.Q2_K, GGMLType.Q4_K, GGMLType.IQ2_XXS, GGMLType.MXFP4,
               GGMLType.Q3_K, GGMLType.Q5_K, GGMLType.Q6_K, GGMLType.IQ4_NL, GGMLType.IQ4_XS,
               GGMLType.IQ2_XS, GGMLType.IQ3_XXS, GGMLType.IQ3_S)  # fmt: skip
FLOAT_TYPES = (GGMLType.F32, GGMLType.F16, GGMLType.BF16)
ALL_TYPES = FLOAT_TYPES + QUANT_TYPES
# Byte offsets of each block's f16 scale fields (MXFP4's one E8M0 byte: see set_scales).
SCALE_FIELDS = {
    GGMLType.Q8_0: (0,),
    GGMLType.Q2_K: (80, 82),
    GGMLType.Q4_K: (0, 2),
    GGMLType.IQ2_XXS: (0,),
    GGMLType.MXFP4: (0,),
    GGMLType.Q3_K: (108,),
    GGMLType.Q5_K: (0, 2),
    GGMLType.Q6_K: (208,),
    GGMLType.IQ4_NL: (0,),
    GGMLType.IQ4_XS: (0,),
    GGMLType.IQ2_XS: (0,),
    GGMLType.IQ3_XXS: (0,),
    GGMLType.IQ3_S: (0,),
}
E8M0_TYPES = frozenset({GGMLType.MXFP4})
# zero, -zero, smallest denormal (+-), largest denormal, smallest normal, +-65504, 1, 2^-10
EDGE_F16 = np.array(
    [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0x1400],
    dtype="<u2",
)
F16_ONE = 0x3C00
# subnormal 2^-128 and 2^-127, tiny, one, huge, 2^126, 2^127
EDGE_E8M0 = np.array([0, 1, 2, 20, 100, 128, 129, 200, 253, 254, 255], dtype=np.uint8)


def bits(a: F32) -> npt.NDArray[np.uint32]:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def same_bits(a: F32, b: F32) -> bool:
    """Bit-identical, except that any NaN equals any NaN."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    return bool(np.array_equal(nan_a, nan_b) and np.array_equal(bits(a)[~nan_a], bits(b)[~nan_b]))


def row_bytes(ggml_type: GGMLType, cols: int) -> int:
    geo = BLOCK_GEOMETRY[ggml_type]
    return cols // geo.elements * geo.nbytes


def e8m0_like(values: npt.NDArray[np.uint16]) -> U8:
    """The E8M0 byte (scale 2^(e - 128) as MXFP4 reads it) nearest each f16 pattern's
    magnitude: 1.0 -> 128; zero, NaN and infinity take the extreme bytes 0 and 255."""
    f = np.abs(np.asarray(values, dtype="<u2").view(np.float16).astype(np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.round(np.log2(f)) + 128
    e = np.where(f == 0, 0, np.where(np.isfinite(e), e, 255))
    return np.clip(e, 0, 255).astype(np.uint8)


def set_scales(raw: U8, ggml_type: GGMLType, values: npt.NDArray[np.uint16]) -> U8:
    """Write f16 bit patterns into every scale field, cycling through `values` (for
    MXFP4 the E8M0 byte of the same magnitude)."""
    geo = BLOCK_GEOMETRY[ggml_type]
    blocks = raw.reshape(raw.shape[0], -1, geo.nbytes)
    if ggml_type in E8M0_TYPES:
        n = blocks.shape[0] * blocks.shape[1]
        blocks[:, :, 0] = np.resize(e8m0_like(values), n).reshape(blocks.shape[:2])
        return raw
    for k, off in enumerate(SCALE_FIELDS[ggml_type]):
        n = blocks.shape[0] * blocks.shape[1]
        pick = np.resize(np.roll(values, k), n).reshape(blocks.shape[:2]).astype("<u2")
        blocks[:, :, off : off + 2] = pick[..., None].view(np.uint8)
    return raw


def quant_rows(ggml_type: GGMLType, rows: int, cols: int, seed: int, *, edge: bool = False) -> U8:
    """Random block bytes with sane f16 scales (or the edge-case scales)."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (rows, row_bytes(ggml_type, cols)), dtype=np.uint8)
    if edge and ggml_type in E8M0_TYPES:  # every byte, 0 and 255 (2^127) included
        blocks = raw.reshape(rows, -1, BLOCK_GEOMETRY[ggml_type].nbytes)
        blocks[:, :, 0] = np.resize(EDGE_E8M0, blocks.shape[:2])
        return raw
    if edge:
        return set_scales(raw, ggml_type, EDGE_F16)
    scales = (rng.standard_normal(rows * cols) * 0.02).astype(np.float16).view("<u2")
    return set_scales(raw, ggml_type, scales)


def float_rows(ggml_type: GGMLType, rows: int, cols: int, seed: int) -> U8:
    w = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
    if ggml_type is GGMLType.F32:
        return w.view(np.uint8)
    if ggml_type is GGMLType.F16:
        return w.astype(np.float16).view(np.uint8)
    return (w.view(np.uint32) >> 16).astype("<u2").view(np.uint8)


def weight_rows(ggml_type: GGMLType, rows: int, cols: int, seed: int) -> U8:
    if ggml_type in FLOAT_TYPES:
        return float_rows(ggml_type, rows, cols, seed)
    return quant_rows(ggml_type, rows, cols, seed)


def edge_activations(n: int, seed: int) -> list[F32]:
    """Activation vectors (length n, a multiple of 256) that stress the quantizers."""
    rng = np.random.default_rng(seed)
    normal = rng.standard_normal(n).astype(np.float32)
    huge = normal.copy()
    huge[::97] = np.float32(3e38)
    extremes = np.where(rng.random(n) < 0.5, np.float32(3.4028235e38), np.float32(-3.4028235e38))
    # Blocks with only denormals (no zeros: 0 * inf would be NaN, outside the spec).
    denormal = (rng.standard_normal(n) * 1e-39).astype(np.float32)
    denormal = np.where(denormal == 0, np.float32(1e-41), denormal).astype(np.float32)
    mixed = normal.copy()
    mixed[1::2] = (rng.standard_normal(n // 2) * 1e-40).astype(np.float32)
    halves = (rng.integers(-254, 255, n) / 2).astype(np.float32)
    halves[::32] = 127  # amax 127 -> d = 1: every x.5 is a round-half-even tie
    ties = np.zeros(n, dtype=np.float32)
    ties[5], ties[9] = -2.0, 2.0  # equal |x|: the first one sets the sign
    one_hot = np.zeros(n, dtype=np.float32)
    one_hot[n // 2] = 1e-3
    return [
        normal, huge, extremes.astype(np.float32), denormal,
        mixed, halves, ties, one_hot, np.zeros(n, dtype=np.float32),
    ]  # fmt: skip
