"""The numpy reference engine switched to docs/reference/model.md §4.5's strict operation order.

An independent check of `--numerics exact`: the reference (written from the spec in
numpy, its own structure and loops) is patched so that every place where numpy would
reassociate or use its own transcendentals follows the spec literally instead:

* f32 reductions (attention dots and sums, indexer dots, Sinkhorn sums, pooling) are
  sequential from 0 (np.cumsum accumulates strictly in order, rounding every step);
* RMSNorm's f64 sum of squares is sequential too;
* expf, cosf, sinf, log1pf, powf, log2f are the C library's f32 functions (ctypes);
* the ratio-4 pooling adds (wp + wc) to the denominator as one term, as
  docs/reference/model.md §3.4 writes.

Slow (transcendentals go one value at a time through ctypes), so use tiny models.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from ds4.adapters.compute.reference import forward
from ds4.domain.engine_math import layers, lowprec
from ds4.domain.engine_math.layers import RopeParams, yarn_ramp

F32 = npt.NDArray[np.float32]
f32 = np.float32

_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
for _name in ("expf", "cosf", "sinf", "log1pf", "log2f"):
    getattr(_libm, _name).restype = ctypes.c_float
    getattr(_libm, _name).argtypes = [ctypes.c_float]
_libm.powf.restype = ctypes.c_float
_libm.powf.argtypes = [ctypes.c_float, ctypes.c_float]


def _elementwise(fn: Callable[[float], float]) -> Callable[[Any], F32]:
    def apply(x: Any) -> F32:
        arr = np.asarray(x, dtype=f32)
        flat = [fn(float(v)) for v in arr.reshape(-1)]
        return np.array(flat, dtype=f32).reshape(arr.shape)

    return apply


expf = _elementwise(_libm.expf)
cosf = _elementwise(_libm.cosf)
sinf = _elementwise(_libm.sinf)
log2f = _elementwise(_libm.log2f)
log1p_expf = _elementwise(lambda v: _libm.log1pf(_libm.expf(v)))


def seq_sum(a: Any, axis: int) -> F32:
    """Sum along axis strictly in index order from 0, rounding to f32 at every step."""
    acc: F32 = np.cumsum(np.asarray(a, dtype=f32), axis=axis, dtype=f32)
    out: F32 = np.asarray(acc.take(-1, axis=axis), dtype=f32)
    return out


def rmsnorm(x: F32, weight: F32 | None, eps: float) -> F32:
    x = np.asarray(x, dtype=f32)
    x64 = x.astype(np.float64)
    ss = np.cumsum(x64 * x64, axis=-1)[..., -1:]
    scale = (f32(1) / np.sqrt((ss / x.shape[-1]).astype(f32) + f32(eps))).astype(f32)
    y: F32 = (x * scale).astype(f32)
    return y if weight is None else (y * weight).astype(f32)


def softplus(x: F32) -> F32:
    x = np.asarray(x, dtype=f32)
    mid = log1p_expf(np.clip(x, -20, 20))
    out: F32 = np.where(x > 20, x, np.where(x < -20, expf(x), mid)).astype(f32)
    return out


def sinkhorn(logits: F32, iters: int, eps: float) -> F32:
    one, e = f32(1), f32(eps)
    ex = expf(logits - np.max(logits, axis=-1, keepdims=True))
    c = (ex * (one / seq_sum(ex, -1)[..., None]) + e).astype(f32)
    c = (c * (one / (seq_sum(c, -2)[..., None, :] + e))).astype(f32)
    for _ in range(iters - 1):
        c = (c * (one / (seq_sum(c, -1)[..., None] + e))).astype(f32)
        c = (c * (one / (seq_sum(c, -2)[..., None, :] + e))).astype(f32)
    return c


def attend_with_sinks(q: F32, rows: F32, sinks: F32, scale: float) -> F32:
    s = (seq_sum(q[:, None, :] * rows[None, :, :], -1) * f32(scale)).astype(f32)
    mx = np.maximum(sinks, np.max(s, axis=1))
    w = expf(s - mx[:, None])
    den = seq_sum(np.concatenate([expf(sinks - mx)[:, None], w], axis=1), 1)
    acc = seq_sum(w[:, :, None] * rows[None, :, :], 1)
    out: F32 = (acc * (f32(1) / den)[:, None]).astype(f32)
    return out


def indexer_scores(index_rows: F32, iq: F32, weights: F32) -> F32:
    dots = np.maximum(seq_sum(index_rows[:, None, :] * iq[None, :, :], -1), f32(0))
    return seq_sum(dots * weights[None, :], 1)


def pool(cand_kv: F32, cand_sc: F32) -> F32:
    """docs/reference/model.md §3.4's loop; 8 candidates = ratio 4, alternating previous / current
    window."""
    mx = np.max(cand_sc, axis=0)
    w = expf(cand_sc - mx)
    den = np.zeros(cand_kv.shape[1], dtype=f32)
    num = np.zeros(cand_kv.shape[1], dtype=f32)
    if cand_kv.shape[0] == 8:
        for i in range(4):
            wp, wc = w[2 * i], w[2 * i + 1]
            den = (den + (wp + wc).astype(f32)).astype(f32)
            num = (num + wp * cand_kv[2 * i]).astype(f32)
            num = (num + wc * cand_kv[2 * i + 1]).astype(f32)
    else:
        for i in range(cand_kv.shape[0]):
            den = (den + w[i]).astype(f32)
            num = (num + w[i] * cand_kv[i]).astype(f32)
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = (num / den).astype(f32)
    out: F32 = np.where(mx <= f32(-5e29), f32(0), pooled).astype(f32)
    return out


def pow2_scale(amax: F32, top: float) -> F32:
    ratio = (amax / f32(top)).astype(f32)
    out: F32 = np.exp2(np.ceil(log2f(ratio))).astype(f32)
    return out


def apply_rope(x: F32, angles: F32, n_rot: int, *, inverse: bool = False) -> F32:
    c, s = cosf(angles), sinf(angles)
    if inverse:
        s = -s
    out = np.array(x, dtype=f32, copy=True)
    tail = out[..., out.shape[-1] - n_rot :]
    x0, x1 = tail[..., 0::2].copy(), tail[..., 1::2].copy()
    tail[..., 0::2] = x0 * c - x1 * s
    tail[..., 1::2] = x0 * s + x1 * c
    return out


def rope_angles(positions: npt.NDArray[np.int64], rp: RopeParams, *, iterated: bool) -> F32:
    """The iterated f32 angle with ts = powf(base, -2/n_rot) (iterated is always on)."""
    pos = np.asarray(positions, dtype=f32).reshape(-1)
    ts = f32(_libm.powf(float(f32(rp.base)), float(f32(-2.0) / f32(rp.n_rot))))
    th, ex = pos.copy(), np.empty((pos.size, rp.n_rot // 2), dtype=f32)
    for k in range(rp.n_rot // 2):
        ex[:, k] = th
        th = (th * ts).astype(f32)
    if rp.yarn is None:
        return ex
    ramp = yarn_ramp(rp.n_rot, rp.base, rp.yarn)
    interp = (ex * (f32(1) / f32(rp.yarn.factor))).astype(f32)
    out: F32 = (interp * (f32(1) - ramp) + ex * ramp).astype(f32)
    return out


def use_strict_reference(mp: pytest.MonkeyPatch) -> None:
    """Patch the numpy reference engine (undone by the MonkeyPatch)."""
    mp.setattr(layers, "expf", expf)
    for module in (layers, forward):
        mp.setattr(module, "rmsnorm", rmsnorm)
    mp.setattr(layers, "softplus", softplus)
    mp.setattr(layers, "sinkhorn", sinkhorn)
    mp.setattr(forward, "attend_with_sinks", attend_with_sinks)
    mp.setattr(forward, "indexer_scores", indexer_scores)
    mp.setattr(forward, "pool", pool)
    mp.setattr(forward, "apply_rope", apply_rope)
    mp.setattr(forward, "rope_angles", rope_angles)
    mp.setattr(lowprec, "_pow2_scale", pow2_scale)
