"""Q2_K and Q4_K quantizers (docs/reference/formats.md §6.4, §6.5), numpy reference.

Input blocks are float32 (n_blocks, 256); importance, when given, is the matching
(n_blocks, 256) weights. Output is (n_blocks, 84) or (n_blocks, 144) bytes.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.adapters.quant.numpy_quantize_search import (
    f16_bytes,
    make_qkx,
    make_qp,
    nearest_clamped,
    round_f16,
    seq_max,
    seq_sum,
)

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]
f32 = np.float32


def _block_weights(blocks: F32, importance: F32, sigma_factor: float) -> F32:
    """w_i = qw_i * sqrt(sigma2 + x_i^2) with sigma2 = factor * sum(x^2) / 256."""
    sigma2 = f32(sigma_factor) * seq_sum(blocks * blocks) / f32(256)
    return importance * np.sqrt(sigma2[:, None] + blocks * blocks)


def _super_scales(sub: F32, nmax: int) -> tuple[F32, F32]:
    """Reference path: 'max sub-scale / nmax' super scale and RTN sub-scale codes."""
    top = seq_max(sub, f32(0))
    with np.errstate(divide="ignore"):
        inv = np.where(top > f32(0), f32(nmax) / top, f32(0))
    codes = nearest_clamped(inv[:, None] * sub, 0, nmax)
    return np.where(top > f32(0), top / f32(nmax), f32(0)).astype(np.float32), codes


def _final_codes(x: F32, searched: F32, *, d: F32, dmin: F32, sc: F32, mn: F32, nmax: int) -> F32:
    """Re-derive codes from the stored (f16) super scales; keep search codes if dd == 0."""
    dd = round_f16(d)[:, None] * sc  # (n, sub)
    m = round_f16(dmin)[:, None] * mn
    with np.errstate(all="ignore"):
        fresh = nearest_clamped((x + m[:, :, None]) / dd[:, :, None], 0, nmax)
    return np.where((dd == f32(0))[:, :, None], searched, fresh)


def quantize_q2_k(blocks: F32, importance: F32 | None) -> U8:
    n = blocks.shape[0]
    x = blocks.reshape(n * 16, 16)
    if importance is None:
        scale, the_min, codes = make_qkx(
            x, np.abs(x), 3, rmin=-0.5, rdelta=0.1, nstep=15, use_mad=True
        )
        scale, the_min = scale.reshape(n, 16), the_min.reshape(n, 16)
        d, ls = _super_scales(scale, 15)
        dmin, lm = _super_scales(the_min, 15)
    else:
        w = _block_weights(blocks, importance, 1.0).reshape(n * 16, 16)
        scale, the_min, codes = make_qkx(x, w, 3, rmin=-0.9, rdelta=0.05, nstep=36, use_mad=False)
        sw = seq_sum(w).reshape(n, 16)
        d, ls = make_qp(scale.reshape(n, 16), sw, 15)
        dmin, lm = make_qp(the_min.reshape(n, 16), sw, 15)
    codes = _final_codes(
        x.reshape(n, 16, 16), codes.reshape(n, 16, 16), d=d, dmin=dmin, sc=ls, mn=lm, nmax=3
    )
    q = codes.reshape(n, 2, 4, 32).astype(np.uint8)
    qs = q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)
    scales = ls.astype(np.uint8) | (lm.astype(np.uint8) << 4)
    return np.concatenate(
        [scales, qs.reshape(n, 64), f16_bytes(d), f16_bytes(dmin)], axis=1
    ).astype(np.uint8)


def pack_q4_k_scales(ls: U8, lm: U8) -> U8:
    """Eight 6-bit (scale, min) pairs into the 12 packed bytes (docs/reference/formats.md §4.5)."""
    out = np.zeros((ls.shape[0], 12), dtype=np.uint8)
    out[:, 0:4] = ls[:, 0:4]
    out[:, 4:8] = lm[:, 0:4]
    out[:, 8:12] = (ls[:, 4:8] & 15) | ((lm[:, 4:8] & 15) << 4)
    out[:, 0:4] |= (ls[:, 4:8] >> 4) << 6
    out[:, 4:8] |= (lm[:, 4:8] >> 4) << 6
    return out


def quantize_q4_k(blocks: F32, importance: F32 | None) -> U8:
    n = blocks.shape[0]
    x = blocks.reshape(n * 8, 32)
    if importance is None:
        av = np.sqrt(seq_sum(x * x) / f32(32))
        w = av[:, None] + np.abs(x)
        scale, the_min, codes = make_qkx(x, w, 15, rmin=-1.0, rdelta=0.1, nstep=20, use_mad=False)
        d, ls = _super_scales(scale.reshape(n, 8), 63)
        dmin, lm = _super_scales(the_min.reshape(n, 8), 63)
    else:
        w = _block_weights(blocks, importance, 2.0).reshape(n * 8, 32)
        scale, the_min, codes = make_qkx(x, w, 15, rmin=-0.9, rdelta=0.05, nstep=36, use_mad=False)
        sw = seq_sum(w).reshape(n, 8)
        d, ls = make_qp(scale.reshape(n, 8), sw, 63)
        dmin, lm = make_qp(the_min.reshape(n, 8), sw, 63)
    codes = _final_codes(
        x.reshape(n, 8, 32), codes.reshape(n, 8, 32), d=d, dmin=dmin, sc=ls, mn=lm, nmax=15
    )
    q = codes.reshape(n, 4, 2, 32).astype(np.uint8)
    qs = q[:, :, 0] | (q[:, :, 1] << 4)
    packed = pack_q4_k_scales(ls.astype(np.uint8), lm.astype(np.uint8))
    return np.concatenate(
        [f16_bytes(d), f16_bytes(dmin), packed, qs.reshape(n, 128)], axis=1
    ).astype(np.uint8)
