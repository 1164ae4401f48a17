"""IQ2_XS, IQ3_XXS and IQ3_S: GGML's grid i-quants (types 17, 18, 21;
docs/reference/formats.md §4.11-§4.13), read only.

Each stores groups of values as an index into a fixed codebook (`iq_grids`, generated
from gguf-py's constants) plus signs, under a per-sub-block odd integer multiplier m:

- IQ2_XS (74 bytes): f16 d, 32 u16 (low 9 bits: an IQ2_XS grid row of 8 values; high 7
  bits: a sign index expanded with even parity, as IQ2_XXS's), 8 scale bytes (per 32
  values, the low nibble s for the first 16, the high nibble for the last 16);
  value = (d * (0.5 + s) * 0.25) * g * sign, and m = 2s + 1 (value = d * m * g * sign / 8).
- IQ3_XXS (98 bytes): f16 d, 64 grid bytes (IQ3_XXS rows of 4 values), then per 32
  values a u32: four 7-bit sign indices (per 8 values) and the scale s in bits 28..31;
  value = (d * (0.5 + s) * 0.5) * g * sign, m = 2s + 1 (value = d * m * g * sign / 4).
- IQ3_S (110 bytes): f16 d, 64 low index bytes, 8 bytes of the indices' 9th bits (bit j
  of byte k for index 8k + j), 32 sign bytes (bit j of byte k for value 8k + j), 4 scale
  bytes (per 32 values, nibbles as IQ2_XS's); value = (d * (1 + 2s)) * g * sign, m = 2s + 1.

`*_parts` give the integer form the dot products use: signed grid values (n, 256),
m per 16 or 32 values, and d. Decoding is float32 in gguf-py's order, bit-identical.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.domain.gguf.iq2xxs_tables import IQ2XXS_SIGNS
from ds4.domain.gguf.iq_grids import IQ2XS_GRID, IQ3S_GRID, IQ3XXS_GRID

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]
I32 = npt.NDArray[np.int32]


def _unpack(entries: tuple[int, ...], width: int) -> I32:
    dtype = "<u8" if width == 8 else "<u4"
    out: I32 = np.array(entries, dtype=dtype).view(np.uint8).reshape(-1, width).astype(np.int32)
    return out


GRID_IQ2XS = _unpack(IQ2XS_GRID, 8)  # (512, 8)
GRID_IQ3XXS = _unpack(IQ3XXS_GRID, 4)  # (256, 4)
GRID_IQ3S = _unpack(IQ3S_GRID, 4)  # (512, 4)
_SIGNS = IQ2XXS_SIGNS.astype(np.int32)  # (128, 8) of +-1, even parity


def _f16(raw: U8) -> F32:
    out: F32 = np.ascontiguousarray(raw).view("<f2").astype(np.float32)
    return out


def _nibbles(raw: U8) -> I32:
    """(..., k) bytes -> (..., 2k): low nibble then high nibble of each byte."""
    out: I32 = np.stack([raw & 15, raw >> 4], axis=-1).reshape(*raw.shape[:-1], -1).astype(np.int32)
    return out


def iq2_xs_parts(blocks: U8) -> tuple[I32, I32, F32]:
    """(..., 74) -> signed grid values (..., 256), scale nibble s per 16 values (..., 16), d."""
    q = np.ascontiguousarray(blocks[..., 2:66]).view("<u2").astype(np.int32)  # (..., 32)
    signed = GRID_IQ2XS[q & 511] * _SIGNS[q >> 9]  # (..., 32, 8)
    values: I32 = signed.reshape(*blocks.shape[:-1], 256)
    return values, _nibbles(blocks[..., 66:74]), _f16(blocks[..., 0:2])[..., 0]


def iq3_xxs_parts(blocks: U8) -> tuple[I32, I32, F32]:
    """(..., 98) -> signed grid values (..., 256), scale s per 32 values (..., 8), d."""
    grid = GRID_IQ3XXS[blocks[..., 2:66]].reshape(*blocks.shape[:-1], 8, 4, 8)
    aux = np.ascontiguousarray(blocks[..., 66:98]).view("<u4")  # (..., 8)
    sign_idx = (aux[..., None] >> np.array([0, 7, 14, 21], dtype=np.uint32)) & 127
    values: I32 = (grid * _SIGNS[sign_idx]).reshape(*blocks.shape[:-1], 256)
    return values, (aux >> 28).astype(np.int32), _f16(blocks[..., 0:2])[..., 0]


def iq3_s_parts(blocks: U8) -> tuple[I32, I32, F32]:
    """(..., 110) -> signed grid values (..., 256), scale s per 32 values (..., 8), d."""
    lead = blocks.shape[:-1]
    bit = np.arange(8, dtype=np.uint8)
    high = ((blocks[..., 66:74, None] >> bit) & 1).reshape(*lead, 64).astype(np.int32)
    index = blocks[..., 2:66].astype(np.int32) | (high << 8)
    negative = ((blocks[..., 74:106, None] >> bit) & 1).reshape(*lead, 256)
    values: I32 = GRID_IQ3S[index].reshape(*lead, 256) * np.where(negative == 1, -1, 1)
    return values.astype(np.int32), _nibbles(blocks[..., 106:110]), _f16(blocks[..., 0:2])[..., 0]


def _apply(db: F32, values: I32, per: int) -> F32:
    """(db per run of `per` values) * |g| * sign, in gguf-py's order (db * g, then * sign)."""
    n = values.shape[0]
    mag = np.abs(values).astype(np.float32).reshape(n, -1, per)
    sign = np.where(values < 0, np.float32(-1), np.float32(1)).reshape(n, -1, per)
    out: F32 = ((db[:, :, None] * mag) * sign).reshape(n, -1)
    return out


def decode_iq2_xs(blocks: U8) -> F32:
    values, s, d = iq2_xs_parts(blocks)
    db = (d[:, None] * (np.float32(0.5) + s.astype(np.float32)) * np.float32(0.25)).astype(
        np.float32
    )
    return _apply(db, values, 16)


def decode_iq3_xxs(blocks: U8) -> F32:
    values, s, d = iq3_xxs_parts(blocks)
    db = (d[:, None] * (np.float32(0.5) + s.astype(np.float32)) * np.float32(0.5)).astype(
        np.float32
    )
    return _apply(db, values, 32)


def decode_iq3_s(blocks: U8) -> F32:
    values, s, d = iq3_s_parts(blocks)
    db = (d[:, None] * (1 + 2 * s).astype(np.float32)).astype(np.float32)
    return _apply(db, values, 32)
