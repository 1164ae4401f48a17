"""The attention sublayer on the GPU: attention with sinks (one query, and a chunk of
queries over their raw window and compressed rows), the grouped output projection, and
`attention_block`, what a step records for one layer's attention (the device twin of
reference/forward.py; docs/vulkan.md#device-forward).

All of a chunk's raw rows and compressor inputs are written into the state first, then
the compressed rows the chunk completes are emitted (in position order, one dispatch),
then the indexer picks rows and every query attends (one dispatch): query t only ever
reads rows at positions <= its own, so this equals the reference's token-by-token order.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.forward import LayerSetup
from ds4.adapters.compute.vulkan.compressor import (
    StoreRounding,
    compressor_inputs,
    emit_rows,
    indexer_choice,
    record_store_round,
)
from ds4.adapters.compute.vulkan.device import Buffer
from ds4.adapters.compute.vulkan.moe import (
    ExpertGroups,
    check_pairs,
    chunk_table_bytes,
    record_moe_group,
    record_moe_matmul,
    record_moe_matmul_q8,
)
from ds4.adapters.compute.vulkan.ops import Ops
from ds4.adapters.compute.vulkan.runtime import MAX_GROUPS, Recorder, VulkanRuntime, runtime
from ds4.adapters.compute.vulkan.step import DeviceLayerState, DeviceStep, Value
from ds4.adapters.compute.vulkan.weights import (
    SHADERS_Q8,
    VulkanWeights,
    kernel_tables,
    record_matmul,
    record_quantize_for,
)
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


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


# -----------------------------------------------------------------------------
# Attention with sinks for a chunk of query tokens on the GPU: each query over its raw
# window plus its compressed rows (native/vulkan/attn_prefill.comp; docs/vulkan.md#kernels).
#
# Decode is the chunk of one. Which rows query t (position pos0 + t) sees follows
# docs/reference/model.md §3.6: raw positions max(p + 1 - n_swa, floor_pos) .. p, then the
# (p + 1) // ratio compressed rows emitted by then (none when ratio is 0), or the top_k of
# them that the indexer selected (record_topk's rows) once there are more than top_k.

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
    b = AttentionBuffers(qb, rb, cb, lb, sb, out, n_head=qs.shape[1], dim=dim, scale=scale)
    rt.run(lambda rec: record_attend_chunk(rec, b, win, n_q=n_q))
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


@dataclass(frozen=True)
class AttentionBuffers:
    """A layer's attention buffers for record_attend_chunk: q/out (n_q, n_head, dim), raw
    rows from win.raw_base, compressed rows from 0, sel (n_q, win.top_k) uint32 (any
    buffer when unused), sinks (n_head); scale multiplies the scores."""

    q: Buffer
    raw: Buffer
    comp: Buffer
    sel: Buffer
    sinks: Buffer
    out: Buffer
    n_head: int
    dim: int
    scale: float


def record_attend_chunk(rec: Recorder, b: AttentionBuffers, win: AttentionWindow, *,
                        n_q: int) -> None:  # fmt: skip
    """Record the chunk's attention of n_q queries over b's rows as win places them."""
    n_head, dim = b.n_head, b.dim
    if not 1 <= dim <= MAX_DIM or not 1 <= n_head <= MAX_GROUPS or not 1 <= n_q <= MAX_GROUPS:
        raise Ds4Error(f"attention: {n_q} queries, {n_head} heads of {dim} out of range")
    push = struct.pack("<3If7I", n_q, n_head, dim, b.scale, win.pos0, win.n_swa, win.raw_base,
                       win.floor_pos, win.ratio, win.top_k, win.raw_ring)  # fmt: skip
    bufs = [b.q, b.raw, b.comp, b.sel, b.sinks, b.out]
    rec.dispatch("attn_prefill", bufs, push, (n_head, n_q, 1))


# -----------------------------------------------------------------------------
# The grouped output projection of attention on the GPU (docs/vulkan.md#kernels):
# low[t, g] = wo_a[g] . heads[t, g] for each of the G groups (wo_a's rows in G slabs of
# o_lora_rank, each over its group's group_in_dim inputs), then out = wo_b . low.
#
# The groups run as the expert-indexed kernels run experts: the flat heads (n, G * gin)
# are (n * G, gin) rows, row q is group q % G's input, and wo_a's slabs are its "experts";
# so the low-rank products of all groups are one dispatch that decodes each wo_a row once
# per chunk of 8 tokens.


def group_ids(n_tok: int, n_groups: int) -> npt.NDArray[np.int32]:
    """The group of each (token, group) row: 0..G-1 per token (upload once for the
    largest chunk: a shorter one reads a prefix)."""
    out: npt.NDArray[np.int32] = np.tile(np.arange(n_groups, dtype=np.int32), n_tok)
    return out


def grouped_output(wo_a: VulkanWeights, wo_b: VulkanWeights, heads: npt.ArrayLike,
                   n_groups: int) -> F32:  # fmt: skip
    """out (n, D) for flat attention heads (n, G * gin), fp32 numerics, one submission."""
    xs = np.ascontiguousarray(heads, dtype=np.float32)
    check_grouped(wo_a, wo_b, n_groups)
    if xs.ndim != 2 or xs.shape[1] != n_groups * wo_a.cols or xs.shape[0] < 1:
        raise Ds4Error(f"grouped output: heads {xs.shape} are not (n, {n_groups * wo_a.cols})")
    rt = wo_a.rt
    n_tok = xs.shape[0]
    n_rows = n_tok * n_groups
    ids = group_ids(n_tok, n_groups)
    bufs = {"x": rt.scratch("go.x", xs.nbytes), "ids": rt.scratch("go.ids", ids.nbytes),
            "out": rt.scratch("go.out", n_tok * wo_b.rows * 4)}  # fmt: skip
    bufs["x"].write(xs)
    bufs["ids"].write(ids)
    dev = {"perm": rt.device_buffer(n_rows * 4),
           "chunks": rt.device_buffer(chunk_table_bytes(n_rows, n_groups)),
           "low": rt.device_buffer(n_tok * wo_a.rows * 4)}  # fmt: skip
    tables = (kernel_tables(rt, wo_a), kernel_tables(rt, wo_b))
    b = GroupedOutputBuffers(bufs["x"], bufs["ids"], dev["perm"], dev["chunks"], dev["low"],
                             bufs["out"])  # fmt: skip
    try:
        rt.run(lambda rec: record_grouped_output(rec, wo_a, wo_b, tables, b, n_tok, n_groups))
    finally:
        for buf in dev.values():
            buf.release()
    out: F32 = bufs["out"].read(np.float32, n_tok * wo_b.rows).reshape(n_tok, wo_b.rows)
    return out


@dataclass(frozen=True)
class GroupedOutputBuffers:
    """record_grouped_output's buffers: heads (n, G * gin) in, ids from group_ids (>= n
    tokens), perm (n * G u32) and chunks (chunk_table_bytes(n * G, G)) and low
    (n, G * o_lora_rank) scratch, out (n, D)."""

    heads: Buffer
    ids: Buffer
    perm: Buffer
    chunks: Buffer
    low: Buffer
    out: Buffer


def record_grouped_output(
    rec: Recorder, wo_a: VulkanWeights, wo_b: VulkanWeights,
    tables: tuple[list[Buffer], list[Buffer]], b: GroupedOutputBuffers, n_tok: int,
    n_groups: int,
) -> None:  # fmt: skip
    """Record b.out (n, D) = wo_b . [wo_a[g] . heads[:, g]]_g with barriers between;
    tables = kernel_tables of wo_a and wo_b."""
    check_grouped(wo_a, wo_b, n_groups)
    n_rows = n_tok * n_groups
    check_pairs(n_rows, n_groups)
    groups = ExpertGroups(b.perm, b.chunks, n_rows, n_groups)
    record_moe_group(rec, b.ids, groups)
    rec.barrier()
    record_moe_matmul(rec, wo_a, groups, b.heads, b.low, 1, tables[0])
    rec.barrier()
    record_matmul(rec, wo_b, b.low, b.out, n_tok, tables[1])


def check_grouped(wo_a: VulkanWeights, wo_b: VulkanWeights, n_groups: int) -> None:
    if n_groups < 1 or wo_a.rows % n_groups or wo_b.cols != wo_a.rows:
        raise Ds4Error(f"grouped output: wo_a {wo_a.rows}x{wo_a.cols} in {n_groups} groups "
                       f"does not feed wo_b {wo_b.rows}x{wo_b.cols}")  # fmt: skip


# ---- what a step records for one layer's attention --------------------------


def attention_block(
    ops: Ops, step: DeviceStep, setup: LayerSetup, h: Value, positions: I64, st: DeviceLayerState,
    tables: tuple[Value, Value],
) -> Value:  # fmt: skip
    """h (n, D): the attn-normed input; returns the projected attention output (n, D)."""
    hp, eps = setup.hp, setup.hp.rms_eps
    n, pre = h.shape[0], setup.prefix
    H, Dh = hp.n_head, hp.head_dim  # noqa: N806
    qa = ops.mm(step, pre + "attn_q_a.weight", h)
    qrn = ops.norm(step, qa, pre + "attn_q_a_norm.weight", qa.shape[1], eps)
    q = ops.norm(step, ops.mm(step, pre + "attn_q_b.weight", qrn), None, Dh, eps)
    ops.rope(step, q, (n, H, Dh), tables, hp.n_rot)
    kv = ops.norm(step, ops.mm(step, pre + "attn_kv.weight", h),
                  pre + "attn_kv_a_norm.weight", Dh, eps)  # fmt: skip
    ops.rope(step, kv, (n, 1, Dh), tables, hp.n_rot)

    p0 = int(positions[0])
    end = p0 + n
    raw = st.raw.reserve(step, end)
    step.copy(step.dev(kv), raw, n * Dh * 4, 0, st.raw.offset(p0))
    st.raw.n = end
    if setup.numerics.kv_rounding:  # FP8 on the non-RoPE dims, then f16, in the cache
        row0, n_nope = p0 - st.raw.base, Dh - hp.n_rot
        step.record(lambda rec: record_store_round(rec, raw, n_rows=n, dim=Dh,
                    mode=StoreRounding.KV_ROW, row0=row0, n_nope=n_nope))  # fmt: skip

    iq = iw = None
    if st.attn is not None:
        compressor_inputs(ops, step, setup, h, p0, "attn_compressor", st.attn)
    if st.index is not None:
        compressor_inputs(ops, step, setup, h, p0, "indexer_compressor", st.index)
        iq = ops.mm(step, pre + "indexer.attn_q_b.weight", qrn)
        ops.rope(step, iq, (n, hp.n_indexer_head, hp.indexer_head_dim), tables, hp.n_rot)
        if setup.numerics.indexer_qat:
            iqb, rows_q = step.dev(iq), n * hp.n_indexer_head
            step.record(lambda rec: record_store_round(rec, iqb, n_rows=rows_q,
                        dim=hp.indexer_head_dim, mode=StoreRounding.INDEX_QUERY))  # fmt: skip
        iw = ops.mm(step, pre + "indexer.proj.weight", h)  # scaled inside the score kernel
    for comp, norm, mode in ((st.attn, "attn_compressor_norm.weight", StoreRounding.KV_ROW),
                             (st.index, "indexer_compressor_norm.weight",
                              StoreRounding.INDEX_ROW)):  # fmt: skip
        if comp is not None:
            emit_rows(ops, step, setup, comp, norm, mode, positions)

    sel = indexer_choice(step, setup, st, p0, n, iq, iw)
    heads = step.new((n, H, Dh))
    win = AttentionWindow(
        pos0=p0, n_swa=hp.n_swa, ratio=st.attn.ratio if st.attn is not None else 0,
        top_k=hp.indexer_top_k if sel is not None else 0, raw_base=st.raw.base,
    )  # fmt: skip
    comp_rows = st.attn.rows if st.attn is not None else None
    check_window(win, n, raw_rows=st.raw.n - st.raw.base,
                 comp_rows=comp_rows.n if comp_rows is not None else 0)  # fmt: skip
    if comp_rows is not None and comp_rows.base:
        raise Ds4Error("vulkan: compressed rows are never trimmed (base must be 0)")
    comp_buf = comp_rows.buf if comp_rows is not None and comp_rows.buf is not None else raw
    qb, hb, sinks = step.dev(q), step.dev(heads), ops.vec(pre + "attn_sinks.weight")
    sb = sel if sel is not None else raw
    scale = 1.0 / math.sqrt(Dh)
    b = AttentionBuffers(qb, raw, comp_buf, sb, sinks, hb, n_head=H, dim=Dh, scale=scale)
    step.record(lambda rec: record_attend_chunk(rec, b, win, n_q=n))
    ops.rope(step, heads, (n, H, Dh), tables, hp.n_rot, inverse=True)

    return ops.mm(step, pre + "attn_output_b.weight", _grouped_low(ops, step, setup, heads))


def _grouped_low(ops: Ops, step: DeviceStep, setup: LayerSetup, heads: Value) -> Value:
    """low (n, G * o_lora_rank): wo_a's slab g over heads' group g, every group in one
    dispatch (the flat heads as n * G rows, the slabs as the "experts" of the
    expert-indexed kernels; bit-identical to one product per group)."""
    hp = setup.hp
    n, G = heads.shape[0], hp.n_out_group  # noqa: N806
    wo_a = ops.store.device(setup.prefix + "attn_output_a.weight")
    lo, rows = wo_a.rows // G, n * G
    ids = step.dev(step.host(group_ids(n, G), np.int32))
    hb, tables = step.dev(heads), kernel_tables(ops.rt, wo_a)
    if ops.store.activation_quant and wo_a.ggml_type in SHADERS_Q8:
        acts = ops.act_buffers(step, wo_a.view(0, lo), rows, rows)
        step.record(lambda rec: record_quantize_for(rec, wo_a, hb, acts, rows))
        step.record(lambda rec: record_moe_matmul_q8(rec, wo_a, G, acts, ids, rows, 1, tables))
        return Value((n, G * lo), buf=acts[2])
    low = step.new((n, G * lo))
    perm, chunks, lb = step.alloc(rows * 4), step.alloc(chunk_table_bytes(rows, G)), low.buf
    assert lb is not None
    groups = ExpertGroups(perm, chunks, rows, G)
    step.record(lambda rec: record_moe_group(rec, ids, groups))
    step.record(lambda rec: record_moe_matmul(rec, wo_a, groups, hb, lb, 1, tables))
    return low
