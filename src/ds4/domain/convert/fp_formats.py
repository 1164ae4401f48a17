"""Decoding DeepSeek's release formats: FP8 E4M3 with E8M0 128x128 tile scales, packed FP4
E2M1 with E8M0 per-32 scales (docs/reference/formats.md §3.5,
docs/reference/model.md §2.5)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

FP8_TILE = 128
FP4_GROUP = 32


def _e4m3_table() -> F32:
    codes = np.arange(256)
    e = (codes >> 3) & 15
    m = (codes & 7).astype(np.float64)
    mag = np.where(e == 0, m * 2.0**-9, (1.0 + m / 8.0) * 2.0 ** (e - 7.0))
    mag[(codes & 127) == 127] = 0.0  # the NaN code decodes to 0, as the release tools do
    return np.where(codes & 128, -mag, mag).astype(np.float32)


E4M3_VALUES: F32 = _e4m3_table()
E2M1_VALUES: F32 = np.array(
    [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32
)


def e8m0_scales(codes: U8) -> F32:
    """E8M0 byte e -> 2^(e-127); e = 255 (NaN in the format) is rejected."""
    if np.any(codes == 255):
        raise Ds4Error("E8M0 scale byte 255 (NaN) in a block scale")
    return np.ldexp(np.float32(1.0), codes.astype(np.int32) - 127).astype(np.float32)


def decode_fp8_tiles(weight: U8, scale: U8, name: str) -> F32:
    """(out, in) E4M3 codes times one E8M0 scale per 128x128 tile."""
    rows, cols = weight.shape
    want = (-(-rows // FP8_TILE), -(-cols // FP8_TILE))
    if scale.shape != want:
        raise Ds4Error(f"{name}: FP8 scale has shape {scale.shape}, expected {want}")
    tiles = e8m0_scales(scale)
    expanded = np.repeat(np.repeat(tiles, FP8_TILE, axis=0)[:rows], FP8_TILE, axis=1)[:, :cols]
    out: F32 = E4M3_VALUES[weight] * expanded
    return out


def decode_fp4_groups(packed: U8, scale: U8, name: str) -> F32:
    """(out, in/2) bytes, two E2M1 codes each (low nibble first), one E8M0 scale per 32."""
    rows, half = packed.shape
    cols = 2 * half
    if cols % FP4_GROUP or scale.shape != (rows, cols // FP4_GROUP):
        raise Ds4Error(
            f"{name}: FP4 scale has shape {scale.shape}, expected {(rows, cols // FP4_GROUP)}"
        )
    codes = np.empty((rows, cols), dtype=np.uint8)
    codes[:, 0::2] = packed & 15
    codes[:, 1::2] = packed >> 4
    values = E2M1_VALUES[codes].reshape(rows, cols // FP4_GROUP, FP4_GROUP)
    out: F32 = (values * e8m0_scales(scale)[:, :, None]).reshape(rows, cols)
    return out
