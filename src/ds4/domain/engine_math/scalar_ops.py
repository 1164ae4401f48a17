"""Elementwise functions and RMSNorm with the precision docs/reference/model.md §2 prescribes."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


def expf(x: F32) -> F32:
    """exp rounded once to f32 (as a correctly rounded libm expf would)."""
    out: F32 = np.exp(np.asarray(x, dtype=np.float64)).astype(np.float32)
    return out


def rmsnorm(x: F32, weight: F32 | None, eps: float) -> F32:
    """RMSNorm over the last axis: f64 sum of squares, f32 scale and products."""
    x = np.asarray(x, dtype=np.float32)
    x64 = x.astype(np.float64)
    mean = (np.sum(x64 * x64, axis=-1, keepdims=True) / x.shape[-1]).astype(np.float32)
    scale = (np.float32(1.0) / np.sqrt(mean + np.float32(eps))).astype(np.float32)
    y: F32 = (x * scale).astype(np.float32)
    if weight is not None:
        y = (y * weight).astype(np.float32)
    return y


def sigmoid(x: F32) -> F32:
    """The plain 1/(1+exp(-x)) form (HC pre/post)."""
    out: F32 = (np.float32(1.0) / (np.float32(1.0) + expf(-x))).astype(np.float32)
    return out


def sigmoid_stable(x: F32) -> F32:
    """1/(1+e^-x) for x >= 0, e^x/(1+e^x) below, so neither branch overflows."""
    x = np.asarray(x, dtype=np.float32)
    e = expf(-np.abs(x))
    one = np.float32(1.0)
    out: F32 = np.where(x >= 0, one / (one + e), e / (one + e)).astype(np.float32)
    return out


def silu(x: F32) -> F32:
    out: F32 = (x * sigmoid_stable(x)).astype(np.float32)
    return out


def softplus(x: F32) -> F32:
    x = np.asarray(x, dtype=np.float32)
    mid = np.log1p(np.exp(np.clip(x, -20, 20).astype(np.float64))).astype(np.float32)
    out: F32 = np.where(x > 20, x, np.where(x < -20, expf(x), mid)).astype(np.float32)
    return out


def f16round(x: F32) -> F32:
    """Round to IEEE binary16 (nearest even) and back: the cache storage rounding."""
    out: F32 = np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)
    return out
