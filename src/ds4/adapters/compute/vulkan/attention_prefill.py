"""Attention with sinks for a chunk of query tokens on the GPU: each query over its raw
window plus its compressed rows (native/vulkan/attn_prefill.comp; docs/vulkan.md#kernels).

Decode is the chunk of one. Which rows query t (position pos0 + t) sees follows
docs/reference/model.md §3.6: raw positions max(p + 1 - n_swa, floor_pos) .. p, then the
(p + 1) // ratio compressed rows emitted by then (none when ratio is 0), or the top_k of
them that the indexer selected (record_topk's rows) once there are more than top_k.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime, runtime
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS, Recorder
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
MAX_DIM = 512  # 64 invocations x 8 output dims each


@dataclass(frozen=True)
class AttentionWindow:
    """Where a chunk's queries sit and which rows they see."""

    pos0: int  # position of the chunk's first query
    n_swa: int  # raw window length, the query's own row included
    ratio: int = 0  # compressor ratio; 0: no compressed rows
    top_k: int = 0  # >0: beyond top_k visible compressed rows, read the selection
    raw_base: int = 0  # position of raw row 0 in the raw buffer
    floor_pos: int = 0  # no raw row before this position (kept rows only)
    raw_ring: int = 0  # >0: the raw rows are a ring, position x at (x - raw_base) % raw_ring

    def first_raw(self, t: int) -> int:
        return max(self.pos0 + t + 1 - self.n_swa, self.floor_pos, 0)

    def visible(self, t: int) -> int:
        return 0 if self.ratio == 0 else (self.pos0 + t + 1) // self.ratio


def attend_chunk(
    q: npt.ArrayLike, raw: npt.ArrayLike, comp: npt.ArrayLike | None, sinks: npt.ArrayLike,
    scale: float, win: AttentionWindow, sel: npt.ArrayLike | None = None, *,
    rt: VulkanRuntime | None = None,
) -> F32:  # fmt: skip
    """q (n_q, H, dim) over raw rows (from win.raw_base) and compressed rows (from 0);
    sel (n_q, top_k) the indexer's rows when win.top_k > 0 -> (n_q, H, dim)."""
    qs = np.ascontiguousarray(q, dtype=np.float32)
    rs = np.ascontiguousarray(raw, dtype=np.float32)
    dim = qs.shape[-1] if qs.ndim == 3 else 0
    cs = np.zeros((1, dim), np.float32) if comp is None else np.ascontiguousarray(comp, np.float32)
    ss = np.ascontiguousarray(sinks, dtype=np.float32)
    ls = np.zeros((1, 1), np.uint32) if sel is None else np.ascontiguousarray(sel, np.uint32)
    if qs.ndim != 3 or rs.ndim != 2 or cs.ndim != 2 or ss.shape != qs.shape[1:2]:
        raise Ds4Error(f"attention: q {qs.shape}, raw {rs.shape}, comp {cs.shape}, sinks "
                       f"{ss.shape} do not fit")  # fmt: skip
    if rs.shape[1] != dim or cs.shape[1] != dim:
        raise Ds4Error(f"attention: rows of {rs.shape[1]}/{cs.shape[1]}, queries of {dim}")
    n_q = qs.shape[0]
    check_window(win, n_q, raw_rows=rs.shape[0], comp_rows=0 if comp is None else cs.shape[0])
    if win.top_k and win.visible(n_q - 1) > win.top_k and ls.shape != (n_q, win.top_k):
        raise Ds4Error(f"attention: selection {ls.shape} is not ({n_q}, {win.top_k})")
    rt = rt or runtime()
    arrays = (qs, rs, cs, ls, ss)
    bufs = [rt.scratch(f"attnp.{i}", a.nbytes) for i, a in enumerate(arrays)]
    for buf, a in zip(bufs, arrays, strict=True):
        buf.write(a)
    out = rt.scratch("attnp.out", qs.nbytes)
    qb, rb, cb, lb, sb = bufs
    rt.run(lambda rec: record_attend_chunk(rec, qb, rb, cb, lb, sb, out, n_q=n_q,
                                           n_head=qs.shape[1], dim=dim, scale=scale,
                                           win=win))  # fmt: skip
    got: F32 = out.read(np.float32, qs.size).reshape(qs.shape)
    return got


def check_window(win: AttentionWindow, n_q: int, *, raw_rows: int, comp_rows: int) -> None:
    """Ds4Error unless every row the chunk's queries read lies inside the buffers."""
    if n_q < 1 or win.n_swa < 1 or win.ratio < 0 or win.top_k < 0 or win.pos0 < 0:
        raise Ds4Error(f"attention: {n_q} queries, window {win} out of range")
    if win.raw_ring:
        span = win.pos0 + n_q - win.first_raw(0)
        if win.raw_ring > raw_rows or span > win.raw_ring or win.first_raw(0) < win.raw_base:
            raise Ds4Error(f"attention: a ring of {win.raw_ring} rows ({raw_rows} given) does "
                           f"not hold the {span} raw rows the chunk reads")  # fmt: skip
    elif win.first_raw(0) < win.raw_base or win.pos0 + n_q - win.raw_base > raw_rows:
        raise Ds4Error(f"attention: raw rows {win.raw_base}..{win.raw_base + raw_rows} do not "
                       f"cover positions {win.first_raw(0)}..{win.pos0 + n_q - 1}")  # fmt: skip
    if win.visible(n_q - 1) > comp_rows:
        raise Ds4Error(f"attention: {win.visible(n_q - 1)} compressed rows visible, "
                       f"{comp_rows} given")  # fmt: skip


def record_attend_chunk(
    rec: Recorder, q: Buffer, raw: Buffer, comp: Buffer, sel: Buffer, sinks: Buffer,
    out: Buffer, *, n_q: int, n_head: int, dim: int, scale: float, win: AttentionWindow,
) -> None:  # fmt: skip
    """Record the chunk's attention: q/out (n_q, n_head, dim), raw rows from
    win.raw_base, compressed rows from 0, sel (n_q, win.top_k) uint32 (any buffer when
    unused), sinks (n_head)."""
    if not 1 <= dim <= MAX_DIM or not 1 <= n_head <= MAX_GROUPS or not 1 <= n_q <= MAX_GROUPS:
        raise Ds4Error(f"attention: {n_q} queries, {n_head} heads of {dim} out of range")
    push = struct.pack("<3If7I", n_q, n_head, dim, scale, win.pos0, win.n_swa, win.raw_base,
                       win.floor_pos, win.ratio, win.top_k, win.raw_ring)  # fmt: skip
    rec.dispatch("attn_prefill", [q, raw, comp, sel, sinks, out], push, (n_head, n_q, 1))
