"""Steering directions and scales (docs/steering.md, docs/reference/model.md §3.12).

A direction file is raw little-endian f32, one row of n_embd values per layer
(n_layer × n_embd, row-major by layer; Flash: 43 × 4096 = 704 512 bytes). Rows are
expected unit-norm and are not renormalised. The edit of one sublayer output row y:

    y ← y − s · v · (v · y)

on the attention output with s = the attn scale and on the FFN output (routed +
shared) with s = the ffn scale, before HC post, in prefill and decode alike. A positive
scale removes the direction, a negative one amplifies it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
MAX_SCALE = 100.0


@dataclass(frozen=True)
class Steering:
    directions: F32  # (n_layer, n_embd)
    attn: float
    ffn: float

    @property
    def active(self) -> bool:
        return self.attn != 0.0 or self.ffn != 0.0


def directions_from_bytes(data: bytes, path: str, n_layer: int, n_embd: int) -> F32:
    """The (n_layer, n_embd) rows of a direction file; Ds4Error on a wrong size or a
    value that is not finite."""
    expected = n_layer * n_embd * 4
    if len(data) != expected:
        raise Ds4Error(f"{path} has size {len(data)} bytes, expected {expected} bytes")
    rows = np.frombuffer(data, dtype="<f4").astype(np.float32).reshape(n_layer, n_embd)
    if not np.isfinite(rows).all():
        raise Ds4Error(f"{path}: the directions hold a NaN or infinite value")
    return rows


def steering_scales(has_file: bool, attn: float | None, ffn: float | None) -> tuple[float, float]:
    """(attn, ffn): the ffn scale is 1 when a file is given and neither scale was set,
    else 0; the attn scale 0. A non-zero scale needs a file."""
    for name, value in (("attn", attn), ("ffn", ffn)):
        if value is not None and not -MAX_SCALE <= value <= MAX_SCALE:
            raise Ds4Error(f"--dir-steering-{name} {value}: use -100..100")
    if not has_file:
        if attn or ffn:
            raise Ds4Error("directional steering needs --dir-steering-file")
        return 0.0, 0.0
    if attn is None and ffn is None:
        return 0.0, 1.0
    return attn or 0.0, ffn or 0.0


def steer_rows(y: F32, v: F32, scale: float) -> F32:
    """y − scale · v · (v · y) for each row of y (n, D); the dot in f32, in index order
    (the native kernel's), then k = scale · dot and y − k·v."""
    dots = np.zeros(y.shape[0], dtype=np.float32)
    for i in range(y.shape[1]):
        dots += v[i] * y[:, i]
    k = (np.float32(scale) * dots).astype(np.float32)
    out: F32 = (y - k[:, None] * v[None, :]).astype(np.float32)
    return out
