"""Shared quantizer primitives (docs/reference/formats.md §6.2), numpy reference.

Every function works on many independent rows at once (leading axis) and runs the
spec's per-row algorithm in float32 with the exact operation order of the native C
twin (native/quantize/qz_search.c): sums run left to right starting from the first
term, running max/min/argmin keep the first winner and never pick a NaN, and every
float -> int rounding goes through `nearest_clamped`. That discipline is what makes
the native output byte-identical to this one.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
f32 = np.float32


def seq_sum(a: F32) -> F32:
    """Sum over the last axis, strictly left to right in float32."""
    return np.cumsum(a, axis=-1, dtype=np.float32)[..., -1]


def seq_max(a: F32, init: F32 | np.float32) -> F32:
    """Running `if (a[i] > m) m = a[i]` over the last axis, starting at `init`."""
    m = np.broadcast_to(np.asarray(init, dtype=np.float32), a.shape[:-1]).copy()
    for i in range(a.shape[-1]):
        m = np.where(a[..., i] > m, a[..., i], m)
    return m


def seq_min(a: F32) -> F32:
    """Running `if (a[i] < m) m = a[i]` over the last axis, starting at a[..., 0]."""
    m = a[..., 0].copy()
    for i in range(1, a.shape[-1]):
        m = np.where(a[..., i] < m, a[..., i], m)
    return m


def seq_argmin(a: F32) -> npt.NDArray[np.intp]:
    """Index of the first strict minimum over the last axis (NaN never wins)."""
    best = a[..., 0].copy()
    idx = np.zeros(a.shape[:-1], dtype=np.intp)
    for i in range(1, a.shape[-1]):
        better = a[..., i] < best
        best = np.where(better, a[..., i], best)
        idx = np.where(better, i, idx)
    return idx


def pick(cond: npt.NDArray[np.bool_], a: F32 | np.float32, b: F32 | np.float32) -> F32:
    """np.where typed for float32 operands."""
    return cast(F32, np.where(cond, a, b))


def nearest_clamped(v: F32, lo: int, hi: int) -> F32:
    """Round half to even, clamp to [lo, hi]; NaN -> lo. Returns +0.0-clean floats.

    (The spec's `nearest_int` is unclamped in make_qp and stores negatives modulo 256;
    we clamp instead: a code can never be negative.)
    """
    r = np.rint(v)
    r = np.where(r >= f32(lo), r, f32(lo))
    r = np.where(r > f32(hi), f32(hi), r)
    return (r + f32(0.0)).astype(np.float32)  # -0.0 -> +0.0, like C's (int) round trip


def f16_bits(v: F32) -> npt.NDArray[np.uint16]:
    """float32 -> IEEE half bits, RNE; NaN -> sign | 0x7e00 (docs/reference/formats.md §4.2)."""
    v = np.asarray(v, dtype=np.float32)
    with np.errstate(all="ignore"):
        bits = v.astype("<f2").view(np.uint16)
    sign = (v.view(np.uint32) >> 16).astype(np.uint16) & np.uint16(0x8000)
    return np.where(np.isnan(v), sign | np.uint16(0x7E00), bits).astype(np.uint16)


def f16_bytes(v: F32) -> npt.NDArray[np.uint8]:
    """(n,) float32 scales as (n, 2) little-endian f16 bytes."""
    return np.ascontiguousarray(f16_bits(v).astype("<u2")).view(np.uint8).reshape(-1, 2)


def round_f16(v: F32) -> F32:
    """The value a scale has after being stored as f16 and read back."""
    return np.asarray(v, dtype=np.float32).astype(np.float16).astype(np.float32)


def make_qkx(
    x: F32,
    w: F32,
    nmax: int,
    *,
    rmin: float,
    rdelta: float,
    nstep: int,
    use_mad: bool,
) -> tuple[F32, F32, F32]:
    """Affine (scale, min) search for rows of x with weights w (make_qkx2/3).

    Returns (scale, the_min >= 0, codes) so that x ~= scale*codes - the_min, codes in [0, nmax].
    """
    with np.errstate(all="ignore"):
        mn = seq_min(x)
        mx = seq_max(x[..., 1:], x[..., 0])
        sum_w = seq_sum(w)
        sum_x = seq_sum(w * x)
        mn = np.where(mn > f32(0), f32(0), mn)
        flat = mx == mn
        iscale = f32(nmax) / (mx - mn)
        scale = f32(1) / iscale
        codes = nearest_clamped(iscale[:, None] * (x - mn[:, None]), 0, nmax)
        best = seq_sum(w * _err(scale[:, None] * codes + mn[:, None] - x, use_mad))
        for k in range(nstep + 1):
            step = f32(rmin) + f32(rdelta) * f32(k) + f32(nmax)
            iscale_k = step / (mx - mn)
            la = nearest_clamped(iscale_k[:, None] * (x - mn[:, None]), 0, nmax)
            wl = w * la
            sl = seq_sum(wl)
            sl2 = seq_sum(wl * la)
            sxl = seq_sum(wl * x)
            det = sum_w * sl2 - sl * sl
            s = cast(F32, (sum_w * sxl - sum_x * sl) / det)
            m = cast(F32, (sl2 * sum_x - sl * sxl) / det)
            positive_min = m > f32(0)
            m = pick(positive_min, f32(0), m)
            s = pick(positive_min, cast(F32, sxl / sl2), s)
            e = seq_sum(w * _err(s[:, None] * la + m[:, None] - x, use_mad))
            take = (det > f32(0)) & (e < best) & ~flat
            codes = np.where(take[:, None], la, codes)
            best = np.where(take, e, best)
            scale = np.where(take, s, scale)
            mn = np.where(take, m, mn)
        scale = np.where(flat, f32(0), scale)
        codes = np.where(flat[:, None], f32(0), codes)
        return scale.astype(np.float32), (-mn).astype(np.float32), codes.astype(np.float32)


def _err(diff: F32, use_mad: bool) -> F32:
    return np.abs(diff) if use_mad else diff * diff


def make_qp(x: F32, w: F32, nmax: int) -> tuple[F32, F32]:
    """Scale-only search for rows of non-negative x: x ~= scale*codes, codes in [0, nmax].

    Returns (scale, codes). A row whose max is below 1e-15 gets scale 0 and codes = 0.
    """
    n = x.shape[-1]
    with np.errstate(all="ignore"):
        mx = seq_max(x, f32(0))
        tiny = mx < f32(1e-15)
        iscale = f32(nmax) / mx
        scale = f32(1) / iscale
        codes = nearest_clamped(iscale[:, None] * x, 0, nmax)
        diff = x - scale[:, None] * codes
        best = seq_sum(w * diff * diff)
        for k in (-4, -3, -2, -1, 1, 2, 3, 4):
            is_k = (f32(0.1) * f32(k) + f32(nmax)) / mx
            s_k = f32(1) / is_k
            lk = nearest_clamped(is_k[:, None] * x, 0, nmax)
            diff = x - s_k[:, None] * lk
            e = seq_sum(w * diff * diff)
            take = e < best
            best = np.where(take, e, best)
            iscale = np.where(take, is_k, iscale)
        codes = nearest_clamped(iscale[:, None] * x, 0, nmax)
        wx = w * x
        slx = seq_sum(wx * codes)
        sl2 = seq_sum(w * codes * codes)
        # Coordinate descent; a pass that changes nothing leaves the state as is, so
        # running all 5 passes equals the spec's early exit, row by row.
        for _ in range(5):
            for i in range(n):
                li, wi, wxi = codes[:, i], w[:, i], wx[:, i]
                a: F32 = slx - wxi * li
                b: F32 = sl2 - wi * li * li
                nl = nearest_clamped(x[:, i] * b / a, 0, nmax)
                a2 = a + wxi * nl
                b2 = b + wi * nl * nl
                take = (a > f32(0)) & (b > f32(0)) & (nl != li) & (a2 * a2 * sl2 > slx * slx * b2)
                codes[:, i] = np.where(take, nl, li)
                slx = np.where(take, a2, slx)
                sl2 = np.where(take, b2, sl2)
        result = np.where(sl2 > f32(0), slx / sl2, f32(0))
        result = np.where(tiny, f32(0), result)
        codes = np.where(tiny[:, None], f32(0), codes)
        return result.astype(np.float32), codes.astype(np.float32)
