"""Attention with sinks on the GPU for one query token (native/vulkan/attn_sinks.comp)."""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime, runtime
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS, Recorder
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]


def attend_with_sinks(
    q: npt.ArrayLike, rows: npt.ArrayLike, sinks: npt.ArrayLike, scale: float, *,
    rt: VulkanRuntime | None = None,
) -> F32:  # fmt: skip
    """q (H, Dh) over rows (N, Dh) used as K and V, a sink logit per head -> (H, Dh)."""
    qs = np.ascontiguousarray(q, dtype=np.float32)
    rs = np.ascontiguousarray(rows, dtype=np.float32)
    ss = np.ascontiguousarray(sinks, dtype=np.float32)
    if qs.ndim != 2 or rs.ndim != 2 or rs.shape[1] != qs.shape[1] or ss.shape != qs.shape[:1]:
        raise Ds4Error(f"attention: q {qs.shape}, rows {rs.shape}, sinks {ss.shape} do not fit")
    n_head, dim = qs.shape
    if rs.shape[0] < 1 or n_head > MAX_GROUPS:
        raise Ds4Error(f"attention: {rs.shape[0]} rows, {n_head} heads out of range")
    rt = rt or runtime()
    n_scores = n_head * rs.shape[0] * 4
    bufs = [rt.scratch("attn.q", qs.nbytes), rt.scratch("attn.rows", rs.nbytes),
            rt.scratch("attn.sinks", ss.nbytes), rt.scratch("attn.scores", n_scores),
            rt.scratch("attn.out", qs.nbytes)]  # fmt: skip
    for buf, data in zip(bufs[:3], (qs, rs, ss), strict=True):
        buf.write(data)
    rt.run(lambda rec: record_attention(rec, bufs, n_head, rs.shape[0], dim, scale))
    out: F32 = bufs[4].read(np.float32, qs.size).reshape(qs.shape)
    return out


def record_attention(
    rec: Recorder, bufs: list[Buffer], n_head: int, n_rows: int, dim: int, scale: float
) -> None:
    """Record attention; bufs = [q, rows, sinks, scores scratch (H*N f32), out]."""
    push = struct.pack("<IIIf", n_head, n_rows, dim, scale)
    rec.dispatch("attn_sinks", bufs, push, (n_head, 1, 1))
