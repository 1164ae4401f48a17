"""Activation quantization before quantized matmuls (docs/reference/model.md §4.2,
docs/reference/formats.md §5.2, §5.4)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

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
