"""y = x * s (+ a row of b chosen by position) on the GPU (native/vulkan/rows_affine.comp):
the compressor score gate + ape[p % ratio] as the device forward forms it, each product
and sum rounded once in f32 as the reference's numpy expression rounds it."""

from __future__ import annotations

import struct

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS, Recorder
from ds4.domain.errors import Ds4Error

WG = 64


def record_rows_affine(
    rec: Recorder, x: Buffer, b: Buffer | None, y: Buffer, *, n_rows: int, dim: int,
    s: float = 1.0, pos0: int = 0, period: int = 1,
) -> None:  # fmt: skip
    """Record y[t] = x[t] * s (+ b[(pos0 + t) % period] when b is given), rows of dim."""
    if n_rows < 1 or dim < 1 or period < 1 or pos0 < 0:
        raise Ds4Error(f"rows_affine: {n_rows} rows of {dim}, period {period} out of range")
    groups = -(-(n_rows * dim) // WG)
    gx = min(groups, MAX_GROUPS)
    push = struct.pack("<IIfIII", n_rows, dim, s, int(b is not None), pos0 % period, period)
    rec.dispatch("rows_affine", [x, b if b is not None else x, y], push,
                 (gx, -(-groups // gx), 1))  # fmt: skip
