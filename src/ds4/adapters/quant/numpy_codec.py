"""The numpy codecs (docs/reference/formats.md §4, §6): the Dequantizer and Quantizer
ports as the executable reference, bit-identical to gguf-py when decoding and the spec
the native twins (ds4.adapters.quant.native_codec) must match byte for byte.

`NUMPY_CODECS` binds each QUANT_FORMATS row (ds4.domain.gguf.quant_formats) with a
codec to its decoder and encoder, keyed by the format's name. A decoder takes raw
blocks (n_blocks, block_bytes) and returns float32 (n_blocks, block_elements); all
arithmetic is float32 in the order the spec gives, so results are bit-exact, not merely
close. An encoder takes checked rows (n_rows, row_elements) and their per-column
importance. Request checking and the synthetic IQ2_XXS importance live here and are
shared with the native adapter, so both accept and reject exactly the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

from ds4.adapters.quant import kquant_blocks as kq
from ds4.adapters.quant.block_quantizers import (
    f16_bits,
    f16_bytes,
    quantize_iq2_xxs,
    quantize_q2_k,
    quantize_q4_k,
)
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType
from ds4.domain.gguf.iq2xxs_tables import IQ2XXS_GRID, IQ2XXS_SIGNS
from ds4.domain.gguf.iq4 import decode_nl as _iq4_nl
from ds4.domain.gguf.iq4 import decode_xs as _iq4_xs
from ds4.domain.gguf.iq_grid_types import decode_iq2_xs, decode_iq3_s, decode_iq3_xxs
from ds4.domain.gguf.mxfp4 import decode_blocks as _mxfp4
from ds4.domain.gguf.mxfp4 import encode_blocks as encode_mxfp4
from ds4.domain.gguf.quant_formats import ENCODABLE, FORMATS_BY_TYPE

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

# The types ds4 encodes (every decoded type but the read-only ones, QUANT_FORMATS' encodes).
QUANTIZABLE: frozenset[GGMLType] = ENCODABLE
# Blocks per numpy pass; bounds the reference's temporaries (IQ2_XXS's neighbour
# search builds (runs, up to 150 neighbours, 8) arrays, hence its smaller chunk).
_DEFAULT_CHUNK_BLOCKS = 2048


# --- decoders


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


# --- encoders


def encode_bf16(x: F32) -> U8:
    """Round to nearest even on the top 16 bits; NaN keeps quiet
    (docs/reference/formats.md §4.2)."""
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    quiet_nan = (bits >> 16) | 0x40
    out = np.where(np.isnan(x), quiet_nan, rounded).astype("<u2")
    return np.ascontiguousarray(out).view(np.uint8).reshape(x.shape[0], -1)


def round_half_away(v: F32) -> F32:
    """C roundf: round half away from zero."""
    t = np.trunc(v)
    frac = np.abs(v - t)
    return (t + np.where(frac >= np.float32(0.5), np.sign(v), np.float32(0))).astype(np.float32)


def quantize_q8_0(blocks: F32, importance: F32 | None = None) -> U8:
    """absmax/127 scale, codes rounded half away from zero (= gguf-py's Q8_0)."""
    del importance  # Q8_0 has no use for it
    amax = np.abs(blocks).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(all="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d)
        v = blocks * inv[:, None]
    # A subnormal d makes 1/d overflow; the f16 scale is 0 then, so the codes are moot.
    q = np.where(np.isfinite(v), np.clip(round_half_away(v), -127, 127), 0)
    return np.concatenate([f16_bytes(d), q.astype(np.int8).view(np.uint8)], axis=1)


def quantize_mxfp4(blocks: F32, importance: F32 | None = None) -> U8:
    """gguf-py's MXFP4: a power-of-two scale from the block's largest magnitude, nearest
    codes (docs/reference/formats.md §4.8)."""
    del importance  # MXFP4 has no use for it
    return encode_mxfp4(blocks)


def _iq2_xxs_encode(blocks: F32, importance: F32 | None) -> U8:
    assert importance is not None  # check_request synthesizes it
    return quantize_iq2_xxs(blocks, importance)


# --- request checking


@dataclass(frozen=True)
class QuantizeRequest:
    """A checked request: rows (n_rows, row_elements) and per-column importance."""

    rows: F32
    ggml_type: GGMLType
    importance: F32 | None  # None also when the format ignores it
    out_shape: tuple[int, ...]


def check_request(
    values: npt.NDArray[np.floating], ggml_type: GGMLType, importance: F32 | None
) -> QuantizeRequest:
    """Validate a quantize call; raise Ds4Error naming the problem."""
    if ggml_type not in QUANTIZABLE:
        names = ", ".join(sorted(t.name for t in QUANTIZABLE))
        raise Ds4Error(f"cannot quantize to {ggml_type.name}: supported types are {names}")
    arr = np.asarray(values)
    if arr.dtype.kind != "f":
        raise Ds4Error(f"values to quantize must be floating point, got {arr.dtype}")
    if arr.ndim == 0:
        raise Ds4Error("values to quantize must have at least one axis (the row)")
    geo = BLOCK_GEOMETRY[ggml_type]
    row = arr.shape[-1]
    if row % geo.elements:
        raise Ds4Error(
            f"rows of {row} values are not a whole number of {ggml_type.name} blocks "
            f"({geo.elements} values each)"
        )
    rows = np.ascontiguousarray(arr, dtype=np.float32).reshape(-1, row)
    fmt = FORMATS_BY_TYPE[ggml_type]
    if fmt.quantized and not np.isfinite(rows).all():
        raise Ds4Error(f"cannot quantize NaN or infinite values to {ggml_type.name}")
    imp: F32 | None = None
    if importance is not None:
        imp = np.ascontiguousarray(importance, dtype=np.float32)
        if imp.shape != (row,):
            raise Ds4Error(f"importance has shape {imp.shape}, expected ({row},) per column")
        if not np.isfinite(imp).all() or (imp < 0).any():
            raise Ds4Error("importance values must be finite and non-negative")
    if fmt.importance == "unused":
        imp = None
    elif fmt.importance == "required" and imp is None:
        # Uniform, not the spec's sum-of-squares synthesis: see synthetic_importance.
        imp = np.ones(row, dtype=np.float32)
    out_shape = (*arr.shape[:-1], row // geo.elements * geo.nbytes)
    return QuantizeRequest(rows, ggml_type, imp, out_shape)


def synthetic_importance(rows: F32) -> F32:
    """Column sums of squares over all rows: ds4's IQ2_XXS importance without an imatrix.

    Not our default (docs/reference/formats.md §7 makes it ds4's): on heavy-tailed weights it is
    worse than plain round-to-nearest (Student-t df=3, 64x2048: relative RMSE 0.535 vs RTN
    0.528), while uniform importance is better (0.507). Callers that want ds4's exact
    behaviour pass this explicitly.
    """
    with np.errstate(over="ignore"):
        total = np.square(rows, dtype=np.float64).sum(axis=0).astype(np.float32)
    return cast(F32, total)


# --- the bindings


@dataclass(frozen=True)
class NumpyCodec:
    decode: Callable[[U8], F32]  # (n_blocks, block_bytes) -> (n_blocks, block_elements)
    encode: Callable[[F32, F32 | None], U8]  # rows, importance -> (n_rows, row_bytes)


def _float_codec(decode: Callable[[U8], F32], encode: Callable[[F32], U8]) -> NumpyCodec:
    return NumpyCodec(decode, lambda rows, importance: encode(rows))


def _block_codec(
    ggml_type: GGMLType,
    decode: Callable[[U8], F32],
    quantize: Callable[[F32, F32 | None], U8],
    chunk: int = _DEFAULT_CHUNK_BLOCKS,
) -> NumpyCodec:
    def encode(rows: F32, importance: F32 | None) -> U8:
        return _quantize_blocks(rows, ggml_type, quantize, importance, chunk)

    return NumpyCodec(decode, encode)


def _read_only(ggml_type: GGMLType, decode: Callable[[U8], F32]) -> NumpyCodec:
    """A type ds4 reads but does not write; check_request refuses it before encode."""

    def encode(rows: F32, importance: F32 | None) -> U8:
        raise Ds4Error(f"cannot quantize to {ggml_type.name}: ds4 only reads it")

    return NumpyCodec(decode, encode)


def _decode_bf16(blocks: U8) -> F32:
    bits: F32 = (blocks.view("<u2").astype(np.uint32) << 16).view(np.float32)
    return bits


NUMPY_CODECS: dict[str, NumpyCodec] = {
    "F32": _float_codec(
        lambda b: b.view("<f4").astype(np.float32), lambda rows: rows.astype("<f4").view(np.uint8)
    ),
    "F16": _float_codec(
        lambda b: b.view("<f2").astype(np.float32),
        lambda rows: np.ascontiguousarray(f16_bits(rows).astype("<u2")).view(np.uint8),
    ),
    "BF16": _float_codec(_decode_bf16, encode_bf16),
    "Q8_0": _block_codec(GGMLType.Q8_0, _q8_0, quantize_q8_0),
    "Q2_K": _block_codec(GGMLType.Q2_K, _q2_k, quantize_q2_k),
    "Q4_K": _block_codec(GGMLType.Q4_K, _q4_k, quantize_q4_k),
    "IQ2_XXS": _block_codec(GGMLType.IQ2_XXS, _iq2_xxs, _iq2_xxs_encode, chunk=256),
    "MXFP4": _block_codec(GGMLType.MXFP4, _mxfp4, quantize_mxfp4),
    "Q3_K": _block_codec(GGMLType.Q3_K, kq.decode_q3_k, kq.quantize_q3_k),
    "Q5_K": _block_codec(GGMLType.Q5_K, kq.decode_q5_k, kq.quantize_q5_k),
    "Q6_K": _block_codec(GGMLType.Q6_K, kq.decode_q6_k, kq.quantize_q6_k),
    "IQ4_NL": _read_only(GGMLType.IQ4_NL, _iq4_nl),
    "IQ4_XS": _read_only(GGMLType.IQ4_XS, _iq4_xs),
    "IQ2_XS": _read_only(GGMLType.IQ2_XS, decode_iq2_xs),
    "IQ3_XXS": _read_only(GGMLType.IQ3_XXS, decode_iq3_xxs),
    "IQ3_S": _read_only(GGMLType.IQ3_S, decode_iq3_s),
}


def _quantize_blocks(
    rows: F32,
    ggml_type: GGMLType,
    fn: Callable[[F32, F32 | None], U8],
    importance: F32 | None,
    chunk: int,
) -> U8:
    geo = BLOCK_GEOMETRY[ggml_type]
    n_rows, row = rows.shape
    per_row = row // geo.elements
    blocks = rows.reshape(-1, geo.elements)
    imp_blocks = None if importance is None else importance.reshape(per_row, geo.elements)
    out = np.empty((blocks.shape[0], geo.nbytes), dtype=np.uint8)
    for start in range(0, blocks.shape[0], chunk):
        stop = min(start + chunk, blocks.shape[0])
        imp = None
        if imp_blocks is not None:
            imp = imp_blocks[np.arange(start, stop) % per_row]
        out[start:stop] = fn(blocks[start:stop], imp)
    return out.reshape(n_rows, per_row * geo.nbytes)


# --- the ports


class NumpyDequantizer:
    """The Dequantizer port in numpy: the executable reference."""

    def dequantize(self, raw: U8, ggml_type: GGMLType) -> F32:
        geo = BLOCK_GEOMETRY[ggml_type]
        lead, row_bytes = raw.shape[:-1], raw.shape[-1]
        if row_bytes % geo.nbytes:
            raise Ds4Error(f"{ggml_type.name}: {row_bytes} bytes is not a whole number of blocks")
        row_elements = row_bytes // geo.nbytes * geo.elements
        codec = NUMPY_CODECS.get(ggml_type.name)
        if codec is None:
            raise Ds4Error(f"dequantizing {ggml_type.name} is not supported")
        flat = np.ascontiguousarray(raw).reshape(-1)
        with np.errstate(all="ignore"):  # inf/NaN scales decode to inf/NaN, as in C
            values = codec.decode(flat.reshape(-1, geo.nbytes)).reshape(-1)
        return values.reshape((*lead, row_elements))


class NumpyQuantizer:
    """Quantizer port, numpy reference implementation."""

    def quantize(
        self,
        values: npt.NDArray[np.float32],
        ggml_type: GGMLType,
        importance: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.uint8]:
        req = check_request(values, ggml_type, importance)
        with np.errstate(all="ignore"):  # huge inputs overflow on purpose (inf scales)
            out = NUMPY_CODECS[ggml_type.name].encode(req.rows, req.importance)
        return out.reshape(req.out_shape)
