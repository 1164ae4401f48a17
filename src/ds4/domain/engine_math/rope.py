"""RoPE on the last n_rot dims of each head, adjacent pairs, YaRN blend
(docs/reference/model.md §2, §2.4)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Yarn:
    factor: float
    orig_ctx: int
    beta_fast: float
    beta_slow: float


@dataclass(frozen=True)
class RopeParams:
    n_rot: int
    base: float
    yarn: Yarn | None  # None on dense (ratio-0) layers


def yarn_ramp(n_rot: int, base: float, yarn: Yarn) -> F32:
    """Per pair k: 1 = pure extrapolation (pos*ts^k), 0 = pure interpolation (/factor)."""

    def corr(beta: float) -> float:
        return n_rot * math.log(yarn.orig_ctx / (beta * 2 * math.pi)) / (2 * math.log(base))

    low = max(0.0, math.floor(corr(yarn.beta_fast)))
    high = min(n_rot - 1.0, math.ceil(corr(yarn.beta_slow)))
    k = np.arange(n_rot // 2, dtype=np.float32)
    span = np.float32(max(0.001, high - low))
    ramp: F32 = (np.float32(1) - np.clip((k - np.float32(low)) / span, 0, 1)).astype(np.float32)
    return ramp


def rope_angles(positions: npt.NDArray[np.int64], rp: RopeParams, *, iterated: bool) -> F32:
    """Angles (n_pos, n_rot/2) in f32.

    iterated=True is ds4's form: th_ex = pos, then th_ex *= ts after each pair, all f32,
    ts = powf(base, -2/n_rot). Otherwise the HF form: pos * inv_freq with
    inv_freq = 1 / base^(2k/n_rot) (also f32).
    """
    half = rp.n_rot // 2
    pos = np.asarray(positions, dtype=np.float32).reshape(-1)
    ramp = yarn_ramp(rp.n_rot, rp.base, rp.yarn) if rp.yarn is not None else None
    if iterated:
        ts = np.float32(math.pow(np.float32(rp.base), np.float32(-2.0 / rp.n_rot)))
        th_ex = pos.copy()
        extrap = np.empty((pos.size, half), dtype=np.float32)
        for k in range(half):
            extrap[:, k] = th_ex
            th_ex = (th_ex * ts).astype(np.float32)
    else:
        exps = (np.arange(0, rp.n_rot, 2, dtype=np.float32) / np.float32(rp.n_rot)).astype(
            np.float32
        )
        inv = (np.float32(1) / np.power(np.float32(rp.base), exps)).astype(np.float32)
        if ramp is not None:
            assert rp.yarn is not None
            interp = (inv / np.float32(rp.yarn.factor)).astype(np.float32)
            inv = (interp * (np.float32(1) - ramp) + inv * ramp).astype(np.float32)
        out: F32 = (pos[:, None] * inv[None, :]).astype(np.float32)
        return out
    if ramp is None:
        return extrap
    assert rp.yarn is not None
    interp = (extrap * np.float32(1.0 / rp.yarn.factor)).astype(np.float32)
    blended: F32 = (interp * (np.float32(1) - ramp) + extrap * ramp).astype(np.float32)
    return blended


def apply_rope(x: F32, angles: F32, n_rot: int, *, inverse: bool = False) -> F32:
    """Rotate adjacent pairs of the last n_rot dims of x (..., dim); angles (..., n_rot/2).

    angles must broadcast against x's leading axes (e.g. (n, 1, n_rot/2) for (n, H, Dh)).
    """
    c = np.cos(angles.astype(np.float64)).astype(np.float32)
    s = np.sin(angles.astype(np.float64)).astype(np.float32)
    if inverse:
        s = -s
    out = np.array(x, dtype=np.float32, copy=True)
    tail = out[..., out.shape[-1] - n_rot :]
    x0 = tail[..., 0::2].copy()
    x1 = tail[..., 1::2].copy()
    tail[..., 0::2] = x0 * c - x1 * s
    tail[..., 1::2] = x0 * s + x1 * c
    return out
