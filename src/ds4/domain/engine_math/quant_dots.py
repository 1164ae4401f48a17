"""Quantized matmul arithmetic (docs/reference/formats.md §5.2, §5.4–5.7): activations
quantized before a quantized matmul, and the quantized weight x quantized activation dot
products.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.gguf.iq2xxs_tables import IQ2XXS_GRID, IQ2XXS_SIGNS
from ds4.domain.gguf.iq4 import KVALUES as IQ4_KVALUES
from ds4.domain.gguf.iq4 import codes_of_runs as iq4_codes
from ds4.domain.gguf.iq4 import xs_scales as iq4_xs_scales
from ds4.domain.gguf.iq_grid_types import iq2_xs_parts, iq3_s_parts, iq3_xxs_parts
from ds4.domain.gguf.mxfp4 import KVALUES as MXFP4_KVALUES
from ds4.domain.gguf.mxfp4 import e8m0_half

GridParts = Callable[
    [npt.NDArray[np.uint8]],
    tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.float32]],
]

# --- actquant ---
# Activation quantization before quantized matmuls (docs/reference/model.md §4.2,
# docs/reference/formats.md §5.2, §5.4).

F32 = npt.NDArray[np.float32]
I32 = npt.NDArray[np.int32]


@dataclass(frozen=True)
class QuantizedActivation:
    """codes (..., n_blocks, block) int32, scales (..., n_blocks) f32, bsums for Q8_K."""

    codes: I32
    scales: F32
    bsums: I32 | None = None


def quantize_q8_0(x: F32) -> QuantizedActivation:
    """Per-32 blocks: d = amax/127 kept in f32, q = rint(x/d); a partial tail pads with 0."""
    x = np.asarray(x, dtype=np.float32)
    n = x.shape[-1]
    pad = (-n) % 32
    if pad:
        x = np.concatenate([x, np.zeros((*x.shape[:-1], pad), dtype=np.float32)], axis=-1)
    blocks = x.reshape(*x.shape[:-1], -1, 32)
    amax = np.max(np.abs(blocks), axis=-1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.clip(np.rint(blocks * inv[..., None]), -128, 127).astype(np.int32)
    return QuantizedActivation(q, d)


def quantize_q8_k(x: F32) -> QuantizedActivation:
    """Per-256 blocks: iscale = -127/mx with mx the first element of largest |x|."""
    x = np.asarray(x, dtype=np.float32)
    if x.shape[-1] % 256:
        raise ValueError(f"Q8_K needs a multiple of 256 values, got {x.shape[-1]}")
    blocks = x.reshape(*x.shape[:-1], -1, 256)
    idx = np.argmax(np.abs(blocks), axis=-1)
    mx = np.take_along_axis(blocks, idx[..., None], axis=-1)[..., 0]
    with np.errstate(divide="ignore"):
        iscale = np.where(mx != 0, np.float32(-127) / mx, np.float32(0)).astype(np.float32)
        d = np.where(mx != 0, np.float32(1) / iscale, np.float32(0)).astype(np.float32)
    q = np.clip(np.rint(blocks * iscale[..., None]), -128, 127).astype(np.int32)
    bsums = q.reshape(*q.shape[:-1], 16, 16).sum(axis=-1).astype(np.int32)
    return QuantizedActivation(q, d, bsums)


# --- quant dots ---
# Quantized weight x quantized activation dot products (docs/reference/formats.md §5.2, §5.5–5.7).
#
# Weight rows arrive as raw GGML blocks (rows, row_bytes). Integer parts are exact; the
# per-block scale products are applied and blocks summed in f32, in block order.

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]


def _f16(raw: U8) -> F32:
    out: F32 = np.ascontiguousarray(raw).view("<f2")[..., 0].astype(np.float32)
    return out


def _sum_blocks(terms: list[F32]) -> F32:
    acc = np.zeros_like(terms[0])
    for term in terms:
        acc = (acc + term).astype(np.float32)
    return acc


def dot_q8_0(raw: U8, act: QuantizedActivation) -> F32:
    """Q8_0 rows (O, nb*34) . one Q8_0-quantized activation (nb, 32) -> (O,)."""
    blocks = raw.reshape(raw.shape[0], -1, 34)
    wd = _f16(blocks[:, :, 0:2])  # (O, nb)
    wq = blocks[:, :, 2:].view(np.int8).astype(np.int32)
    return _per32_dot(wd, wq, act)


def dot_mxfp4(raw: U8, act: QuantizedActivation) -> F32:
    """MXFP4 rows (O, nb*17) . one Q8_0-quantized activation (nb, 32) -> (O,)
    (docs/reference/formats.md §5.10): the Q8_0 formula with the block's E8M0 scale and
    its doubled E2M1 values (low nibbles are values 0..15, high nibbles 16..31)."""
    blocks = raw.reshape(raw.shape[0], -1, 17)
    wd = e8m0_half(blocks[:, :, 0])  # (O, nb)
    qs = blocks[:, :, 1:]
    wq = MXFP4_KVALUES[np.concatenate([qs & 15, qs >> 4], axis=-1)].astype(np.int32)
    return _per32_dot(wd, wq, act)


def _per32_dot(wd: F32, wq: npt.NDArray[np.int32], act: QuantizedActivation) -> F32:
    """sum_b (wd[:, b] * dx[b]) * isum[:, b] in block order, isum exact in int32."""
    isum = np.einsum("obk,bk->ob", wq, act.codes)
    terms = [
        ((wd[:, b] * act.scales[b]) * isum[:, b].astype(np.float32)) for b in range(isum.shape[1])
    ]
    return _sum_blocks([t.astype(np.float32) for t in terms])


def dot_q2_k(raw: U8, act: QuantizedActivation) -> F32:
    """Q2_K rows (O, nb*84) . one Q8_K activation (nb, 256) -> (O,)."""
    assert act.bsums is not None
    blocks = raw.reshape(raw.shape[0], -1, 84)
    scales = blocks[:, :, :16]
    qs = blocks[:, :, 16:80].reshape(raw.shape[0], -1, 2, 1, 32)
    shifts = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 1, 4, 1)
    codes = ((qs >> shifts) & 3).reshape(raw.shape[0], -1, 16, 16).astype(np.int32)
    q8 = act.codes.reshape(-1, 16, 16)
    sub = np.einsum("objk,bjk->obj", codes, q8)
    isum = np.sum((scales & 15).astype(np.int64) * sub, axis=-1)
    summs = np.sum((scales >> 4).astype(np.int64) * act.bsums[None], axis=-1)
    d = _f16(blocks[:, :, 80:82])
    dmin = _f16(blocks[:, :, 82:84])
    terms = []
    for b in range(isum.shape[1]):
        dall = (act.scales[b] * d[:, b]).astype(np.float32)
        dm = (act.scales[b] * dmin[:, b]).astype(np.float32)
        terms.append(dall * isum[:, b].astype(np.float32) - dm * summs[:, b].astype(np.float32))
    return _sum_blocks([t.astype(np.float32) for t in terms])


def dot_q4_k(raw: U8, act: QuantizedActivation) -> F32:
    """Q4_K rows (O, nb*144) . one Q8_K activation (nb, 256) -> (O,) (CUDA form)."""
    assert act.bsums is not None
    blocks = raw.reshape(raw.shape[0], -1, 144)
    packed = blocks[:, :, 4:16]
    lo, hi, tail = packed[..., :4], packed[..., 4:8], packed[..., 8:12]
    sc = np.concatenate([lo & 63, (tail & 15) | ((lo >> 6) << 4)], axis=-1).astype(np.int64)
    mn = np.concatenate([hi & 63, (tail >> 4) | ((hi >> 6) << 4)], axis=-1).astype(np.int64)
    qs = blocks[:, :, 16:].reshape(raw.shape[0], -1, 4, 1, 32)
    shifts = np.array([0, 4], dtype=np.uint8).reshape(1, 1, 1, 2, 1)
    codes = ((qs >> shifts) & 15).reshape(raw.shape[0], -1, 8, 32).astype(np.int32)
    q8 = act.codes.reshape(-1, 8, 32)
    sub = np.einsum("objk,bjk->obj", codes, q8)
    isum = np.sum(sc * sub, axis=-1)
    pair = act.bsums.reshape(-1, 8, 2).sum(axis=-1).astype(np.int64)
    summs = np.sum(mn * pair[None], axis=-1)
    d = _f16(blocks[:, :, 0:2])
    dmin = _f16(blocks[:, :, 2:4])
    terms = []
    for b in range(isum.shape[1]):
        t1 = (act.scales[b] * d[:, b]).astype(np.float32) * isum[:, b].astype(np.float32)
        t2 = (act.scales[b] * dmin[:, b]).astype(np.float32) * summs[:, b].astype(np.float32)
        terms.append(t1 - t2)
    return _sum_blocks([t.astype(np.float32) for t in terms])


def iq2_xxs_signed_grid(raw: U8) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64], F32]:
    """Integer signed grid values (O, nb, 8, 32), ls (O, nb, 8) and d (O, nb)."""
    blocks = raw.reshape(raw.shape[0], -1, 66)
    groups = blocks[:, :, 2:].reshape(raw.shape[0], -1, 8, 8)
    aux = np.ascontiguousarray(groups[..., 4:]).view("<u4")[..., 0]
    ls = (aux >> 28).astype(np.int64)
    sign_idx = (aux[..., None] >> np.array([0, 7, 14, 21], dtype=np.uint32)) & 127
    grid = IQ2XXS_GRID[groups[..., :4]] * IQ2XXS_SIGNS[sign_idx]  # (O, nb, 8, 4, 8)
    signed = grid.reshape(raw.shape[0], -1, 8, 32).astype(np.int32)
    return signed, ls, _f16(blocks[:, :, 0:2])


def dot_iq2_xxs(raw: U8, act: QuantizedActivation) -> F32:
    """IQ2_XXS rows (O, nb*66) . one Q8_K activation (nb, 256) -> (O,)."""
    signed, ls, d = iq2_xxs_signed_grid(raw)
    q8 = act.codes.reshape(-1, 8, 32)
    sub = np.einsum("objk,bjk->obj", signed, q8).astype(np.int64)
    bsum = np.sum(sub * (2 * ls + 1), axis=-1)  # may exceed 2^24: int64, then f32
    terms = [
        ((d[:, b] * act.scales[b]).astype(np.float32) * bsum[:, b].astype(np.float32))
        for b in range(bsum.shape[1])
    ]
    total = _sum_blocks([t.astype(np.float32) for t in terms])
    out: F32 = (np.float32(0.125) * total).astype(np.float32)
    return out


def dot_iq4_nl(raw: U8, act: QuantizedActivation) -> F32:
    """IQ4_NL rows (O, nb*18) . one Q8_0 activation (nb, 32) -> (O,)
    (docs/reference/formats.md §5.11): the Q8_0 formula with the f16 scale and the
    non-linear levels (low nibbles are values 0..15, high nibbles 16..31)."""
    blocks = raw.reshape(raw.shape[0], -1, 18)
    wq = IQ4_KVALUES[iq4_codes(blocks[:, :, 2:])].astype(np.int32)
    return _per32_dot(_f16(blocks[:, :, 0:2]), wq, act)


def dot_iq4_xs(raw: U8, act: QuantizedActivation) -> F32:
    """IQ4_XS rows (O, nb*136) . one Q8_K activation (nb, 256) -> (O,): per block
    isum = sum_i (s_i - 32) * (levels . codes of run i), exact; acc += (dw * dx) * isum."""
    blocks = raw.reshape(raw.shape[0], -1, 136)
    levels = IQ4_KVALUES[iq4_codes(blocks[:, :, 8:])].astype(np.int32)
    sub = np.einsum("objk,bjk->obj", levels.reshape(raw.shape[0], -1, 8, 32),
                    act.codes.reshape(-1, 8, 32))  # fmt: skip
    isum = np.sum(iq4_xs_scales(blocks).astype(np.int64) * sub, axis=-1)
    d = _f16(blocks[:, :, 0:2])
    terms = [
        (d[:, b] * act.scales[b]).astype(np.float32) * isum[:, b].astype(np.float32)
        for b in range(isum.shape[1])
    ]
    return _sum_blocks([t.astype(np.float32) for t in terms])


def _grid_dot(
    raw: U8, act: QuantizedActivation, parts: GridParts, block_bytes: int, run: int, post: float
) -> F32:
    """Grid i-quant rows . one Q8_K activation (docs/reference/formats.md §5.12): per block
    bsum = sum over runs of `run` values of (2s + 1) * (signed grid . codes), exact;
    acc += (dw * dx) * bsum in block order, then acc * post (a power of two)."""
    blocks = raw.reshape(raw.shape[0], -1, block_bytes)
    values, s, d = parts(blocks)
    sub = np.einsum("objk,bjk->obj", values.reshape(raw.shape[0], -1, 256 // run, run),
                    act.codes.reshape(-1, 256 // run, run))  # fmt: skip
    bsum = np.sum((2 * s.astype(np.int64) + 1) * sub, axis=-1)
    terms = [
        (d[:, b] * act.scales[b]).astype(np.float32) * bsum[:, b].astype(np.float32)
        for b in range(bsum.shape[1])
    ]
    total = _sum_blocks([t.astype(np.float32) for t in terms])
    out: F32 = (np.float32(post) * total).astype(np.float32)
    return out


def dot_iq2_xs(raw: U8, act: QuantizedActivation) -> F32:
    """IQ2_XS rows (O, nb*74) . one Q8_K activation -> (O,): scale per 16 values, x 1/8."""
    return _grid_dot(raw, act, iq2_xs_parts, 74, 16, 0.125)


def dot_iq3_xxs(raw: U8, act: QuantizedActivation) -> F32:
    """IQ3_XXS rows (O, nb*98) . one Q8_K activation -> (O,): scale per 32 values, x 1/4."""
    return _grid_dot(raw, act, iq3_xxs_parts, 98, 32, 0.25)


def dot_iq3_s(raw: U8, act: QuantizedActivation) -> F32:
    """IQ3_S rows (O, nb*110) . one Q8_K activation -> (O,): scale per 32 values."""
    return _grid_dot(raw, act, iq3_s_parts, 110, 32, 1.0)


# --- Q3_K, Q5_K, Q6_K (docs/reference/formats.md §4.14, §5.13): the codes as
# adapters/quant/kquant_blocks.py unpacks them, restated here (domain/ stays pure).


def _q3_k_parts(blocks: U8) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Signed scales (O, nb, 16) and codes (O, nb, 16, 16) of Q3_K blocks (O, nb, 110)."""
    o, nb = blocks.shape[:2]
    packed = blocks[..., 96:108]
    low = np.concatenate([packed[..., :8] & 15, packed[..., :8] >> 4], axis=-1)
    shifts = np.repeat(np.array([0, 2, 4, 6], dtype=np.uint8), 4)
    high = (packed[..., 8 + np.arange(16) % 4] >> shifts) & 3
    scales = (low | (high << 4)).astype(np.int64) - 32
    qs = blocks[..., 32:96].reshape(o, nb, 2, 1, 32)
    lo = (qs >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 1, 4, 1)) & 3
    hm = blocks[..., :32].reshape(o, nb, 1, 32)
    hi = (hm >> np.arange(8, dtype=np.uint8).reshape(1, 1, 8, 1)) & 1
    codes = lo.reshape(o, nb, 256).astype(np.int32) - 4 * (
        1 - hi.reshape(o, nb, 256).astype(np.int32)
    )
    return scales, codes.reshape(o, nb, 16, 16)


def _symmetric_dot(
    d: F32, scales: npt.NDArray[np.int64], codes: npt.NDArray[np.int32], act: QuantizedActivation
) -> F32:
    """sum_b (d[:, b] * d_a[b]) * isum[:, b], isum = sum_k s_k * (codes_k . a_k), exact."""
    q8 = act.codes.reshape(-1, 16, 16)
    sub = np.einsum("objk,bjk->obj", codes, q8).astype(np.int64)
    isum = np.sum(scales * sub, axis=-1)
    terms = [
        ((d[:, b] * act.scales[b]).astype(np.float32) * isum[:, b].astype(np.float32))
        for b in range(isum.shape[1])
    ]
    return _sum_blocks([t.astype(np.float32) for t in terms])


def dot_q3_k(raw: U8, act: QuantizedActivation) -> F32:
    """Q3_K rows (O, nb*110) . one Q8_K activation (nb, 256) -> (O,)."""
    blocks = raw.reshape(raw.shape[0], -1, 110)
    scales, codes = _q3_k_parts(blocks)
    return _symmetric_dot(_f16(blocks[:, :, 108:110]), scales, codes, act)


def dot_q6_k(raw: U8, act: QuantizedActivation) -> F32:
    """Q6_K rows (O, nb*210) . one Q8_K activation (nb, 256) -> (O,)."""
    blocks = raw.reshape(raw.shape[0], -1, 210)
    o, nb = blocks.shape[:2]
    ql = blocks[..., :128].reshape(o, nb, 2, 1, 64)
    lo = ((ql >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 1, 2, 1)) & 15).reshape(o, nb, 256)
    qh = blocks[..., 128:192].reshape(o, nb, 2, 1, 32)
    hi = (qh >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 1, 4, 1)) & 3
    codes = (lo | (hi.reshape(o, nb, 256) << 4)).astype(np.int32) - 32
    scales = blocks[..., 192:208].view(np.int8).astype(np.int64)
    return _symmetric_dot(_f16(blocks[:, :, 208:210]), scales, codes.reshape(o, nb, 16, 16), act)


def dot_q5_k(raw: U8, act: QuantizedActivation) -> F32:
    """Q5_K rows (O, nb*176) . one Q8_K activation (nb, 256) -> (O,) (as Q4_K)."""
    assert act.bsums is not None
    blocks = raw.reshape(raw.shape[0], -1, 176)
    o, nb = blocks.shape[:2]
    packed = blocks[:, :, 4:16]
    lo, hi, tail = packed[..., :4], packed[..., 4:8], packed[..., 8:12]
    sc = np.concatenate([lo & 63, (tail & 15) | ((lo >> 6) << 4)], axis=-1).astype(np.int64)
    mn = np.concatenate([hi & 63, (tail >> 4) | ((hi >> 6) << 4)], axis=-1).astype(np.int64)
    qs = blocks[:, :, 48:].reshape(o, nb, 4, 1, 32)
    low = ((qs >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 1, 2, 1)) & 15).reshape(
        o, nb, 8, 32
    )
    qh = blocks[:, :, 16:48].reshape(o, nb, 1, 32)
    high = (qh >> np.arange(8, dtype=np.uint8).reshape(1, 1, 8, 1)) & 1
    codes = (low | (high << 4)).astype(np.int32)
    sub = np.einsum("objk,bjk->obj", codes, act.codes.reshape(-1, 8, 32))
    isum = np.sum(sc * sub, axis=-1)
    pair = act.bsums.reshape(-1, 8, 2).sum(axis=-1).astype(np.int64)
    summs = np.sum(mn * pair[None], axis=-1)
    d = _f16(blocks[:, :, 0:2])
    dmin = _f16(blocks[:, :, 2:4])
    terms = []
    for b in range(nb):
        t1 = (act.scales[b] * d[:, b]).astype(np.float32) * isum[:, b].astype(np.float32)
        t2 = (act.scales[b] * dmin[:, b]).astype(np.float32) * summs[:, b].astype(np.float32)
        terms.append(t1 - t2)
    return _sum_blocks([t.astype(np.float32) for t in terms])
