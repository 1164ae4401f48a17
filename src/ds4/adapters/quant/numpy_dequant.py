"""Numpy reference dequantizers (docs/reference/formats.md §4), bit-identical to gguf-py.

Each decoder takes raw blocks shaped (n_blocks, block_bytes) and returns float32
values shaped (n_blocks, block_elements). All arithmetic is float32 in the order
the spec gives, so results are bit-exact, not merely close.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType
from ds4.domain.gguf.iq2xxs_tables import IQ2XXS_GRID, IQ2XXS_SIGNS

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]


def _f16(raw: U8) -> F32:
    return raw.copy().view("<f2").astype(np.float32)


def _q8_0(blocks: U8) -> F32:
    d = _f16(blocks[:, :2])
    q = blocks[:, 2:].view(np.int8).astype(np.float32)
    return d * q


def _q2_k(blocks: U8) -> F32:
    scales = blocks[:, :16]
    qs = blocks[:, 16:80]
    d = _f16(blocks[:, 80:82])
    dmin = _f16(blocks[:, 82:84])
    dl = d * (scales & 15).astype(np.float32)  # (n, 16)
    ml = dmin * (scales >> 4).astype(np.float32)
    # codes[n, half, lane, l] = (qs[n, 32*half + l] >> 2*lane) & 3; value index
    # 128*half + 32*lane + l, which is also sub-block order 16 x 16.
    shifts = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    codes = (qs.reshape(-1, 2, 1, 32) >> shifts) & 3
    q = codes.reshape(-1, 16, 16).astype(np.float32)
    return (dl[:, :, None] * q - ml[:, :, None]).reshape(-1, 256)


def q4_k_scale_min(scales: U8) -> tuple[U8, U8]:
    """Unpack the 12 packed bytes into eight 6-bit (scale, min) pairs."""
    lo, hi = scales[:, :4], scales[:, 4:8]
    tail = scales[:, 8:12]
    sc = np.concatenate([lo & 63, (tail & 15) | ((lo >> 6) << 4)], axis=1)
    mn = np.concatenate([hi & 63, (tail >> 4) | ((hi >> 6) << 4)], axis=1)
    return sc, mn


def _q4_k(blocks: U8) -> F32:
    d = _f16(blocks[:, 0:2])
    dmin = _f16(blocks[:, 2:4])
    sc, mn = q4_k_scale_min(blocks[:, 4:16])
    dl = d * sc.astype(np.float32)  # (n, 8)
    ml = dmin * mn.astype(np.float32)
    qs = blocks[:, 16:].reshape(-1, 4, 1, 32)
    shifts = np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    q = ((qs >> shifts) & 15).reshape(-1, 8, 32).astype(np.float32)
    return (dl[:, :, None] * q - ml[:, :, None]).reshape(-1, 256)


def _iq2_xxs(blocks: U8) -> F32:
    d = _f16(blocks[:, :2])  # (n, 1)
    groups = blocks[:, 2:].reshape(-1, 8, 8)  # eight 8-byte groups per block
    grid_idx = groups[:, :, :4]  # one grid row index per 8 values
    aux = np.ascontiguousarray(groups[:, :, 4:]).view("<u4")[:, :, 0]
    ls = (aux >> 28).astype(np.float32)
    db = d * (np.float32(0.5) + ls) * np.float32(0.25)  # (n, 8)
    sign_idx = (aux[:, :, None] >> np.array([0, 7, 14, 21], dtype=np.uint32)) & 127
    signs = IQ2XXS_SIGNS[sign_idx]  # (n, 8, 4, 8) of +-1
    grid = IQ2XXS_GRID[grid_idx]  # (n, 8, 4, 8)
    values: F32 = (db[:, :, None, None] * grid * signs).reshape(-1, 256)
    return values


_DECODERS: dict[GGMLType, Callable[[U8], F32]] = {
    GGMLType.Q8_0: _q8_0,
    GGMLType.Q2_K: _q2_k,
    GGMLType.Q4_K: _q4_k,
    GGMLType.IQ2_XXS: _iq2_xxs,
}


class NumpyDequantizer:
    """The Dequantizer port in numpy: the executable reference."""

    def dequantize(self, raw: U8, ggml_type: GGMLType) -> F32:
        geo = BLOCK_GEOMETRY[ggml_type]
        lead, row_bytes = raw.shape[:-1], raw.shape[-1]
        if row_bytes % geo.nbytes:
            raise Ds4Error(f"{ggml_type.name}: {row_bytes} bytes is not a whole number of blocks")
        row_elements = row_bytes // geo.nbytes * geo.elements
        flat = np.ascontiguousarray(raw).reshape(-1)
        if ggml_type is GGMLType.F32:
            values = flat.view("<f4").astype(np.float32)
        elif ggml_type is GGMLType.F16:
            values = flat.view("<f2").astype(np.float32)
        elif ggml_type is GGMLType.BF16:
            values = (flat.view("<u2").astype(np.uint32) << 16).view(np.float32)
        elif ggml_type in _DECODERS:
            with np.errstate(all="ignore"):  # inf/NaN scales decode to inf/NaN, as in C
                values = _DECODERS[ggml_type](flat.reshape(-1, geo.nbytes)).reshape(-1)
        else:
            raise Ds4Error(f"dequantizing {ggml_type.name} is not supported")
        return values.reshape((*lead, row_elements))
