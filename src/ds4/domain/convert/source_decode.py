"""Turn one stored checkpoint tensor (any release dtype) into float32 or int32 rows."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.domain.convert.fp_formats import FP8_TILE, decode_fp4_groups, decode_fp8_tiles
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
I32 = npt.NDArray[np.int32]

SCALED_DTYPES = frozenset({"F8_E4M3", "I8"})  # need their sibling `.scale` tensor


def decode_rows(
    name: str,
    raw: npt.NDArray[np.generic],
    dtype: str,
    scale: npt.NDArray[np.generic] | None,
    rows: slice,
) -> F32 | I32:
    """Rows `rows` (a step-1 slice of the leading axis) of a stored tensor, decoded.

    FP8 bands must start on a 128-row tile boundary so each tile's scale applies whole.
    """
    part = raw[rows] if raw.ndim > 1 else raw
    if dtype in ("F32", "F16", "F64"):
        return np.ascontiguousarray(part, dtype=np.float32)
    if dtype == "BF16":
        bits = np.ascontiguousarray(part).astype(np.uint32) << 16
        return bits.view(np.float32)
    if dtype in ("I64", "I32"):
        values = np.asarray(part)
        info = np.iinfo(np.int32)
        if values.size and (values.min() < info.min or values.max() > info.max):
            raise Ds4Error(f"{name}: integer values do not fit in int32")
        return values.astype(np.int32)
    if dtype in SCALED_DTYPES:
        if scale is None:
            raise Ds4Error(f"{name}: {dtype} weight without its .scale tensor")
        if raw.ndim != 2:
            raise Ds4Error(f"{name}: {dtype} weight must be 2-D, got shape {raw.shape}")
        start, stop = rows.start or 0, rows.stop if rows.stop is not None else raw.shape[0]
        codes = np.ascontiguousarray(part).view(np.uint8)
        scale_u8 = np.asarray(scale).view(np.uint8)
        if dtype == "F8_E4M3":
            if start % FP8_TILE:
                raise Ds4Error(f"{name}: FP8 rows must be decoded in whole 128-row tiles")
            tile_rows = slice(start // FP8_TILE, -(-stop // FP8_TILE))
            return decode_fp8_tiles(codes, scale_u8[tile_rows], name)
        return decode_fp4_groups(codes, scale_u8[start:stop], name)
    raise Ds4Error(f"{name}: stored dtype {dtype} cannot be converted")


def logical_shape(shape: tuple[int, ...], dtype: str) -> tuple[int, ...]:
    """The value shape of a stored tensor (packed FP4 holds two values per byte)."""
    if dtype == "I8" and len(shape) == 2:
        return (shape[0], shape[1] * 2)
    return shape
