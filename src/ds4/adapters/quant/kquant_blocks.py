"""Q3_K, Q5_K and Q6_K blocks (docs/reference/formats.md §4.14): the numpy decoders,
bit-identical to gguf-py's, and ds4's encoders, the executable spec the native twins in
native/quant/ds4_quant.c and native/quantize/qz_kquants.c match byte for byte.

Layouts (256 values per block; value v):

- Q3_K, 110 bytes: hmask[32], qs[64], scales[12], f16 d. Code q = lo - 4 * (1 - hi)
  in -4..3, lo = (qs[32h + l] >> 2j) & 3 for v = 128h + 32j + l, hi = bit v/32 of
  hmask[v % 32]; sub-block k = v/16 has the 6-bit scale s_k - 32 (low nibble of
  scales[k % 8] (k < 8) or its high nibble (k >= 8), high two bits from
  scales[8 + k % 4] >> 2(k/4)). Value = (d * (s_k - 32)) * q.
- Q5_K, 176 bytes: f16 d, f16 dmin, Q4_K's 12 packed (scale, min) bytes, qh[32],
  qs[128]. Sub-block j = v/32, l = v % 32: code = ((qs[32(j/2) + l] >> 4(j%2)) & 15)
  | (bit j of qh[l]) << 4 in 0..31. Value = (d * sc_j) * q - dmin * mn_j.
- Q6_K, 210 bytes: ql[128], qh[64], int8 scales[16], f16 d. For v = 128h + 64s + i
  (i < 64): low nibble s of ql[64h + i]; for v = 128h + 32k + l: bits 2k of
  qh[32h + l] as bits 4-5; code - 32 in -32..31. Value = (d * sc_{v/16}) * q.

The encoders: Q5_K is Q4_K's search with 5-bit codes; Q3_K and Q6_K are symmetric
round-to-nearest (sub-block scale amax / qmax, super scale max sub-scale / smax, codes
re-derived from the stored f16 super scale), the importance vector unused.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.adapters.quant.block_quantizers import (
    _super_scales,
    f16_bytes,
    nearest_clamped,
    pack_q4_k_scales,
    qkx_search,
    round_f16,
    seq_max,
)

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]
f32 = np.float32


def _f16(raw: U8) -> F32:
    return np.ascontiguousarray(raw).view("<f2").astype(np.float32)


def _q4_k_scale_min(scales: U8) -> tuple[U8, U8]:
    lo, hi, tail = scales[:, :4], scales[:, 4:8], scales[:, 8:12]
    sc = np.concatenate([lo & 63, (tail & 15) | ((lo >> 6) << 4)], axis=1)
    mn = np.concatenate([hi & 63, (tail >> 4) | ((hi >> 6) << 4)], axis=1)
    return sc, mn


# --- decoders


def q3_k_scales(packed: U8) -> npt.NDArray[np.int8]:
    """The 16 signed 6-bit scales (s - 32) of each block's 12 packed bytes."""
    low = np.concatenate([packed[:, :8] & 15, packed[:, :8] >> 4], axis=1)
    shifts = np.repeat(np.array([0, 2, 4, 6], dtype=np.uint8), 4)
    high = (packed[:, 8 + np.arange(16) % 4] >> shifts) & 3
    out: npt.NDArray[np.int8] = ((low | (high << 4)).astype(np.int8) - np.int8(32)).astype(np.int8)
    return out


def q3_k_codes(blocks: U8) -> npt.NDArray[np.int8]:
    """Signed codes (n, 256) in -4..3."""
    n = blocks.shape[0]
    qs = blocks[:, 32:96].reshape(n, 2, 1, 32)
    lo = (qs >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)) & 3
    hm = blocks[:, :32].reshape(n, 1, 32)
    hi = (hm >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & 1
    q = lo.reshape(n, 256).astype(np.int8) - ((hi.reshape(n, 256) ^ 1) << 2).astype(np.int8)
    return q.astype(np.int8)


def decode_q3_k(blocks: U8) -> F32:
    n = blocks.shape[0]
    d = _f16(blocks[:, 108:110])
    dl = d * q3_k_scales(blocks[:, 96:108]).astype(np.float32)  # (n, 16)
    q = q3_k_codes(blocks).reshape(n, 16, 16).astype(np.float32)
    out: F32 = (dl[:, :, None] * q).reshape(n, 256)
    return out


def q5_k_codes(blocks: U8) -> U8:
    """Codes (n, 256) in 0..31."""
    n = blocks.shape[0]
    qs = blocks[:, 48:].reshape(n, 4, 1, 32)
    lo = ((qs >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)) & 15).reshape(n, 8, 32)
    qh = blocks[:, 16:48].reshape(n, 1, 32)
    hi = (qh >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & 1
    return (lo | (hi << 4)).reshape(n, 256).astype(np.uint8)


def decode_q5_k(blocks: U8) -> F32:
    n = blocks.shape[0]
    d = _f16(blocks[:, 0:2])
    dmin = _f16(blocks[:, 2:4])
    sc, mn = _q4_k_scale_min(blocks[:, 4:16])
    dl = d * sc.astype(np.float32)
    ml = dmin * mn.astype(np.float32)
    q = q5_k_codes(blocks).reshape(n, 8, 32).astype(np.float32)
    out: F32 = (dl[:, :, None] * q - ml[:, :, None]).reshape(n, 256)
    return out


def q6_k_codes(blocks: U8) -> npt.NDArray[np.int8]:
    """Signed codes (n, 256) in -32..31."""
    n = blocks.shape[0]
    ql = blocks[:, :128].reshape(n, 2, 1, 64)
    lo = ((ql >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)) & 15).reshape(n, 256)
    qh = blocks[:, 128:192].reshape(n, 2, 1, 32)
    hi = ((qh >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)) & 3).reshape(n, 256)
    return ((lo | (hi << 4)).astype(np.int8) - np.int8(32)).astype(np.int8)


def decode_q6_k(blocks: U8) -> F32:
    n = blocks.shape[0]
    d = _f16(blocks[:, 208:210])
    dl = d * blocks[:, 192:208].view(np.int8).astype(np.float32)  # (n, 16)
    q = q6_k_codes(blocks).reshape(n, 16, 16).astype(np.float32)
    out: F32 = (dl[:, :, None] * q).reshape(n, 256)
    return out


# --- encoders


def _symmetric(blocks: F32, qmax: int, smax: int) -> tuple[F32, F32, F32]:
    """Per 16-value sub-block: scale amax / qmax; super scale d and scale codes 0..smax
    (_super_scales); codes nearest(x / (f16(d) * sc)) in -qmax..qmax, 0 where that is 0."""
    n = blocks.shape[0]
    x = blocks.reshape(n, 16, 16)
    amax = seq_max(np.abs(x), f32(0))  # (n, 16)
    d, sc = _super_scales((amax / f32(qmax)).astype(np.float32), smax)
    dd = round_f16(d)[:, None] * sc  # (n, 16)
    with np.errstate(all="ignore"):
        q = nearest_clamped(x / dd[:, :, None], -qmax, qmax)
    q = np.where((dd == f32(0))[:, :, None], f32(0), q)
    return d, sc, q.reshape(n, 256)


def quantize_q3_k(blocks: F32, importance: F32 | None) -> U8:
    del importance  # round-to-nearest
    n = blocks.shape[0]
    d, sc, q = _symmetric(blocks, 3, 31)
    s = (sc.astype(np.int64) + 32).astype(np.uint8)  # stored s - 32 = sc
    scales = np.zeros((n, 12), dtype=np.uint8)
    scales[:, :8] = (s[:, :8] & 15) | ((s[:, 8:] & 15) << 4)
    for k in range(16):
        scales[:, 8 + k % 4] |= ((s[:, k] >> 4) << (2 * (k // 4))).astype(np.uint8)
    qi = q.astype(np.int64)
    hi = (qi >= 0).astype(np.uint8).reshape(n, 8, 32)
    hmask = np.zeros((n, 32), dtype=np.uint8)
    for k in range(8):
        hmask |= (hi[:, k] << k).astype(np.uint8)
    lo = (qi & 3).astype(np.uint8).reshape(n, 2, 4, 32)
    qs = lo[:, :, 0] | (lo[:, :, 1] << 2) | (lo[:, :, 2] << 4) | (lo[:, :, 3] << 6)
    return np.concatenate([hmask, qs.reshape(n, 64), scales, f16_bytes(d)], axis=1).astype(np.uint8)


def quantize_q6_k(blocks: F32, importance: F32 | None) -> U8:
    del importance  # round-to-nearest
    n = blocks.shape[0]
    d, sc, q = _symmetric(blocks, 31, 127)
    u = (q.astype(np.int64) + 32).astype(np.uint8).reshape(n, 2, 4, 32)  # (h, k, l)
    lo, hi = u & 15, u >> 4
    ql = np.concatenate(
        [lo[:, :, 0] | (lo[:, :, 2] << 4), lo[:, :, 1] | (lo[:, :, 3] << 4)], axis=2
    )
    qh = hi[:, :, 0] | (hi[:, :, 1] << 2) | (hi[:, :, 2] << 4) | (hi[:, :, 3] << 6)
    return np.concatenate(
        [ql.reshape(n, 128), qh.reshape(n, 64), sc.astype(np.uint8), f16_bytes(d)], axis=1
    ).astype(np.uint8)


def quantize_q5_k(blocks: F32, importance: F32 | None) -> U8:
    """Q4_K's search and final codes with 31 levels."""
    n = blocks.shape[0]
    codes, d, dmin, ls, lm = qkx_search(blocks, importance, 31, rmin=-0.5, nstep=15)
    q = codes.reshape(n, 8, 32).astype(np.uint8)
    qh = np.zeros((n, 32), dtype=np.uint8)
    for j in range(8):
        qh |= ((q[:, j] >> 4) << j).astype(np.uint8)
    lo = (q & 15).reshape(n, 4, 2, 32)
    qs = lo[:, :, 0] | (lo[:, :, 1] << 4)
    packed = pack_q4_k_scales(ls.astype(np.uint8), lm.astype(np.uint8))
    return np.concatenate(
        [f16_bytes(d), f16_bytes(dmin), packed, qh, qs.reshape(n, 128)], axis=1
    ).astype(np.uint8)
