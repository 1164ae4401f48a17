"""The lightning indexer on the GPU: scores and top-k of the compressed rows
(native/vulkan/indexer_scores.comp, topk.comp; docs/vulkan.md#kernels).

Query t of a chunk sits at position pos0 + t and sees the n_t = (pos0 + t + 1) // ratio
compressed rows emitted by then (rows buffer row = emission index). Scores as the
reference's indexer_scores (f32, summed in another order); the selection as its
top_k_mask: the k largest, lower index first among equal scores, ascending; every row
when n_t <= k.
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime, runtime
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS, Recorder
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


def visible_rows(pos0: int, n_q: int, ratio: int) -> list[int]:
    """How many compressed rows each query of the chunk sees."""
    return [(pos0 + t + 1) // ratio for t in range(n_q)]


def indexer_select(
    rows: npt.ArrayLike, iq: npt.ArrayLike, weights: npt.ArrayLike, *, pos0: int, k: int,
    ratio: int = 4, w_scale: float = 1.0, rt: VulkanRuntime | None = None,
) -> tuple[F32, list[I64]]:  # fmt: skip
    """rows (n_rows, dim), iq (n_q, n_head, dim), weights (n_q, n_head) -> the scores
    (n_q, stride; query t's first n_t valid) and each query's selected row indices."""
    rs, qs, ws = (np.ascontiguousarray(a, dtype=np.float32) for a in (rows, iq, weights))
    if rs.ndim != 2 or qs.ndim != 3 or qs.shape[2] != rs.shape[1] or ws.shape != qs.shape[:2]:
        raise Ds4Error(f"indexer: rows {rs.shape}, iq {qs.shape}, weights {ws.shape} do not fit")
    n_q, n_head, dim = qs.shape
    counts = visible_rows(pos0, n_q, ratio)
    stride = max(counts[-1], 1)
    if counts[-1] > rs.shape[0]:
        raise Ds4Error(f"indexer: query at {pos0 + n_q - 1} needs {counts[-1]} rows, "
                       f"{rs.shape[0]} given")  # fmt: skip
    rt = rt or runtime()
    rb, qb, wb = (rt.scratch(f"indexer.{i}", max(a.nbytes, 4)) for i, a in enumerate((rs, qs, ws)))
    for buf, a in ((rb, rs), (qb, qs), (wb, ws)):
        buf.write(a)
    sb, selb = (
        rt.scratch("indexer.scores", n_q * stride * 4),
        rt.scratch("indexer.sel", n_q * k * 4),
    )

    def record(rec: Recorder) -> None:
        record_indexer_scores(rec, rb, qb, wb, sb, n_q=n_q, n_head=n_head, dim=dim, pos0=pos0,
                              ratio=ratio, stride=stride, w_scale=w_scale)  # fmt: skip
        rec.barrier()
        record_topk(rec, sb, selb, n_q=n_q, k=k, pos0=pos0, ratio=ratio, stride=stride)

    rt.run(record)
    scores: F32 = sb.read(np.float32, n_q * stride).reshape(n_q, stride)
    sel = selb.read(np.uint32, n_q * k).reshape(n_q, k).astype(np.int64)
    return scores, [sel[t, : min(n, k)] for t, n in enumerate(counts)]


def record_indexer_scores(
    rec: Recorder, rows: Buffer, iq: Buffer, weights: Buffer, scores: Buffer, *, n_q: int,
    n_head: int, dim: int, pos0: int, ratio: int, stride: int, w_scale: float = 1.0,
) -> None:  # fmt: skip
    """Record scores[t, c] (rows of `stride` f32) for c < (pos0 + t + 1) // ratio; the
    weights are multiplied by w_scale (in f32) first."""
    most = (pos0 + n_q) // ratio
    if n_q < 1 or n_q > MAX_GROUPS or ratio < 1 or most > stride or most > MAX_GROUPS:
        raise Ds4Error(f"indexer: {n_q} queries, {most} rows (stride {stride}) out of range")
    if most == 0:
        return  # no query sees a row yet
    push = struct.pack("<6If", n_q, n_head, dim, pos0, ratio, stride, w_scale)
    rec.dispatch("indexer_scores", [rows, iq, weights, scores], push, (most, n_q, 1))


def record_topk(
    rec: Recorder, scores: Buffer, sel: Buffer, *, n_q: int, k: int, pos0: int, ratio: int,
    stride: int,
) -> None:  # fmt: skip
    """Record sel[t, :min(n_t, k)] (uint32 rows of k): query t's selected rows, ascending."""
    if k < 1 or n_q < 1 or n_q > MAX_GROUPS or ratio < 1:
        raise Ds4Error(f"top-k: k {k}, {n_q} queries, ratio {ratio} out of range")
    push = struct.pack("<5I", n_q, k, pos0, ratio, stride)
    rec.dispatch("topk", [scores, sel], push, (n_q, 1, 1))
