"""Compressor emissions on the GPU (native/vulkan/compress.comp; docs/vulkan.md#kernels).

From the per-token compressor projections (kv, gate) and the learned position bias ape,
each finished window is pooled (softmax over its tokens of score = gate + ape, per dim;
ratio 4 overlaps the previous window), normalised and rotated to the window's first
position, as the reference's emission does (docs/reference/model.md §3.4) in f32. The
ds4 numerics' storage rounding of the row (FP8 / FP4 / f16) is not part of this kernel.
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.rope import rope_tables
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime, runtime
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS, Recorder
from ds4.domain.engine_math.layers import RopeParams
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]


def compress_windows(
    kv: npt.ArrayLike, gate: npt.ArrayLike, ape: npt.ArrayLike, norm: npt.ArrayLike, *,
    ratio: int, rp: RopeParams, iterated: bool, eps: float, rt: VulkanRuntime | None = None,
) -> F32:  # fmt: skip
    """Every row emitted over tokens 0..n-1 (row = position) of kv/gate (n, c*d):
    (n // ratio, d)."""
    kvs, gs = (np.ascontiguousarray(a, dtype=np.float32) for a in (kv, gate))
    apes, ns = (np.ascontiguousarray(a, dtype=np.float32) for a in (ape, norm))
    d = ns.shape[0] if ns.ndim == 1 else 0
    lanes = 2 if ratio == 4 else 1
    if kvs.ndim != 2 or kvs.shape != gs.shape or apes.shape != (ratio, lanes * d):
        raise Ds4Error(f"compress: kv {kvs.shape}, gate {gs.shape}, ape {apes.shape}, norm "
                       f"{ns.shape} do not fit ratio {ratio}")  # fmt: skip
    if kvs.shape[1] != lanes * d:
        raise Ds4Error(f"compress: rows of {kvs.shape[1]} are not {lanes} lanes of {d}")
    n_emit = kvs.shape[0] // ratio
    if n_emit < 1:
        raise Ds4Error(f"compress: {kvs.shape[0]} tokens finish no window of {ratio}")
    cos, sin = rope_tables(np.arange(n_emit, dtype=np.int64) * ratio, rp, iterated=iterated)
    rt = rt or runtime()
    ins = [
        rt.scratch(f"compress.{i}", a.nbytes) for i, a in enumerate((kvs, gs, apes, ns, cos, sin))
    ]
    for buf, a in zip(ins, (kvs, gs, apes, ns, cos, sin), strict=True):
        buf.write(a)
    out = rt.scratch("compress.out", n_emit * d * 4)
    kvb, gb, apeb, nb, cb, sb = ins
    rt.run(lambda rec: record_compress(
        rec, kvb, gb, apeb, nb, cb, sb, out, d=d, ratio=ratio, n_rot=rp.n_rot, eps=eps,
        last_row=ratio - 1, first_pos=0, rope_row=0, out_row=0, n_emit=n_emit))  # fmt: skip
    got: F32 = out.read(np.float32, n_emit * d).reshape(n_emit, d)
    return got


def record_compress(
    rec: Recorder, kv: Buffer, gate: Buffer, ape: Buffer, norm: Buffer, cos: Buffer,
    sin: Buffer, out: Buffer, *, d: int, ratio: int, n_rot: int, eps: float, last_row: int,
    first_pos: int, rope_row: int, out_row: int, n_emit: int = 1, rope_stride: int = 1,
    in_ring: int = 0,
) -> None:  # fmt: skip
    """Record n_emit consecutive emissions into rows out_row.. of out (rows of d f32).

    kv/gate: per-token projections (rows of c*d f32, c = 2 for ratio 4 else 1), the first
    emission's window ending at row last_row and starting at absolute position first_pos
    (a multiple of ratio: for ratio 4 the previous window's rows are read when
    first_pos >= 4); ape (ratio, c*d); norm (d); cos/sin: rope_tables rows, emission e at
    row rope_row + e * rope_stride (the window's first position). in_ring > 0: kv/gate
    are ring buffers of in_ring rows, row r stored at r % in_ring (last_row may then be
    the absolute position)."""
    if ratio < 1 or d < 2 or d % 2 or n_rot % 2 or not 0 <= n_rot <= d:
        raise Ds4Error(f"compress: d {d}, ratio {ratio}, n_rot {n_rot} do not fit")
    if first_pos % ratio or last_row + 1 < ratio or not 1 <= n_emit <= MAX_GROUPS:
        raise Ds4Error(f"compress: window at {first_pos} (row {last_row}), {n_emit} rows")
    if ratio == 4 and first_pos >= 4 and last_row + 1 < 8:
        raise Ds4Error(f"compress: row {last_row} leaves no room for the previous window")
    if in_ring and in_ring < ratio + (4 if ratio == 4 else 0):
        raise Ds4Error(f"compress: a ring of {in_ring} rows cannot hold a window of {ratio}")
    push = struct.pack("<IIIf6I", d, ratio, n_rot, eps, last_row, first_pos, rope_row,
                       rope_stride, out_row, in_ring)  # fmt: skip
    rec.dispatch("compress", [kv, gate, ape, norm, cos, sin, out], push, (n_emit, 1, 1))
