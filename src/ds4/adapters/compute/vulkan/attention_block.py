"""The attention sublayer on the device over a DeviceLayerState (the device twin of
reference/forward.py; docs/vulkan.md#device-forward).

All of a chunk's raw rows and compressor inputs are written into the state first, then
the compressed rows the chunk completes are emitted (in position order, one dispatch),
then the indexer picks rows and every query attends (one dispatch): query t only ever
reads rows at positions <= its own, so this equals the reference's token-by-token order.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.forward import LayerSetup
from ds4.adapters.compute.vulkan.actquant import record_quantize_for
from ds4.adapters.compute.vulkan.attention_prefill import (
    AttentionWindow,
    check_window,
    record_attend_chunk,
)
from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.compress import record_compress
from ds4.adapters.compute.vulkan.device_state import DeviceCompressor, DeviceLayerState
from ds4.adapters.compute.vulkan.grouped_output import group_ids
from ds4.adapters.compute.vulkan.indexer import record_indexer_scores, record_topk
from ds4.adapters.compute.vulkan.matvec import kernel_tables
from ds4.adapters.compute.vulkan.matvec_q8 import SHADERS_Q8
from ds4.adapters.compute.vulkan.moe import (
    chunk_table_bytes,
    record_moe_group,
    record_moe_matmul,
    record_moe_matmul_q8,
)
from ds4.adapters.compute.vulkan.ops import Ops
from ds4.adapters.compute.vulkan.rows_affine import record_rows_affine
from ds4.adapters.compute.vulkan.step import Step, Value
from ds4.adapters.compute.vulkan.store_round import StoreRounding, record_store_round
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


def attention_block(
    ops: Ops, step: Step, setup: LayerSetup, h: Value, positions: I64, st: DeviceLayerState,
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
        _compressor_inputs(ops, step, setup, h, p0, "attn_compressor", st.attn)
    if st.index is not None:
        _compressor_inputs(ops, step, setup, h, p0, "indexer_compressor", st.index)
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
            _emit_rows(ops, step, setup, comp, norm, mode, positions)

    sel = _indexer_choice(step, setup, st, p0, n, iq, iw)
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
    step.record(lambda rec: record_attend_chunk(rec, qb, raw, comp_buf, sb, sinks, hb, n_q=n,
                n_head=H, dim=Dh, scale=scale, win=win))  # fmt: skip
    ops.rope(step, heads, (n, H, Dh), tables, hp.n_rot, inverse=True)

    return ops.mm(step, pre + "attn_output_b.weight", _grouped_low(ops, step, setup, heads))


def _grouped_low(ops: Ops, step: Step, setup: LayerSetup, heads: Value) -> Value:
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
    step.record(lambda rec: record_moe_group(rec, ids, perm, chunks, rows, G))
    step.record(lambda rec: record_moe_matmul(rec, wo_a, G, hb, lb, perm, chunks, rows, 1,
                                              tables))  # fmt: skip
    return low


def _compressor_inputs(
    ops: Ops, step: Step, setup: LayerSetup, h: Value, p0: int, kind: str,
    comp: DeviceCompressor,
) -> None:  # fmt: skip
    """Append each token's compressor inputs (kv projection, score = gate + ape at the
    token's place in its window) to the state."""
    n = h.shape[0]
    kv = ops.mm(step, f"{setup.prefix}{kind}_kv.weight", h)
    gate = ops.mm(step, f"{setup.prefix}{kind}_gate.weight", h)
    kvb = comp.kv.reserve(step, p0 + n)
    step.copy(step.dev(kv), kvb, n * comp.kv.row_bytes, 0, comp.kv.offset(p0))
    comp.kv.n = p0 + n
    score = step.new((n, comp.width))
    gb, sb, ape = step.dev(gate), score.buf, ops.vec(f"{setup.prefix}{kind}_ape.weight")
    assert sb is not None
    width, ratio = comp.width, comp.ratio
    step.record(lambda rec: record_rows_affine(rec, gb, ape, sb, n_rows=n, dim=width, pos0=p0,
                                               period=ratio))  # fmt: skip
    scb = comp.score.reserve(step, p0 + n)
    step.copy(sb, scb, n * comp.score.row_bytes, 0, comp.score.offset(p0))
    comp.score.n = p0 + n


def _emit_rows(
    ops: Ops, step: Step, setup: LayerSetup, comp: DeviceCompressor, norm: str,
    mode: StoreRounding, positions: I64,
) -> None:  # fmt: skip
    """The compressed rows the chunk completes, pooled on the device from the resident
    inputs (scores already hold ape, so the kernel adds a zero table) and appended."""
    hp = setup.hp
    lasts = [int(p) for p in positions if (int(p) + 1) % comp.ratio == 0]
    if not lasts:
        return
    if comp.kv.base != comp.score.base:
        raise Ds4Error("vulkan: compressor kv and score histories out of step")
    first = lasts[0] // comp.ratio  # index of the first row emitted here
    out = comp.rows.reserve(step, first + len(lasts))
    starts = np.array([last + 1 - comp.ratio for last in lasts], dtype=np.int64)
    cos, sin = ops.rope_tables(step, starts, setup.rope(), setup.numerics.iterated_rope)
    kvb, scb, cb, sb = comp.kv.buf, comp.score.buf, step.dev(cos), step.dev(sin)
    assert kvb is not None and scb is not None
    zero_ape = ops.zeros(comp.ratio * comp.width * 4)
    nb = ops.vec(setup.prefix + norm)
    d, ratio, n_emit = comp.row_width, comp.ratio, len(lasts)
    last_row, out_row = lasts[0] - comp.kv.base, first - comp.rows.base
    step.record(lambda rec: record_compress(
        rec, kvb, scb, zero_ape, nb, cb, sb, out, d=d, ratio=ratio, n_rot=hp.n_rot,
        eps=hp.rms_eps, last_row=last_row, first_pos=lasts[0] + 1 - ratio, rope_row=0,
        out_row=out_row, n_emit=n_emit))  # fmt: skip
    comp.rows.n = first + n_emit
    num = setup.numerics
    if mode is StoreRounding.INDEX_ROW and num.indexer_qat != num.kv_rounding:
        raise Ds4Error("vulkan: indexer rows need indexer QAT and f16 rounding together")
    if num.kv_rounding:
        n_nope = hp.head_dim - hp.n_rot
        step.record(lambda rec: record_store_round(rec, out, n_rows=n_emit, dim=d, mode=mode,
                    row0=out_row, n_nope=n_nope))  # fmt: skip


def _indexer_choice(
    step: Step, setup: LayerSetup, st: DeviceLayerState, p0: int, n: int, iq: Value | None,
    iw: Value | None,
) -> Buffer | None:  # fmt: skip
    """The indexer's selection (n, top_k) uint32 when some query sees more than top_k
    compressed rows; None when every query reads all of them."""
    hp = setup.hp
    if st.index is None or st.attn is None or iq is None or iw is None:
        return None
    counts = [(p0 + t + 1) // st.attn.ratio for t in range(n)]
    if counts[-1] <= hp.indexer_top_k:
        return None
    idx = st.index.rows
    if idx.buf is None or idx.base:
        raise Ds4Error("vulkan: indexer rows are never trimmed (base must be 0)")
    stride, k = max((p0 + n) // 4, 1), hp.indexer_top_k
    scores, sel = step.alloc(n * stride * 4), step.alloc(n * k * 4)
    rows, qb, wb = idx.buf, step.dev(iq), step.dev(iw)
    w_scale = float(np.float32(1.0 / math.sqrt(hp.indexer_head_dim * hp.n_indexer_head)))
    step.record(lambda rec: record_indexer_scores(rec, rows, qb, wb, scores, n_q=n,
                n_head=hp.n_indexer_head, dim=hp.indexer_head_dim, pos0=p0, ratio=4,
                stride=stride, w_scale=w_scale))  # fmt: skip
    step.record(lambda rec: record_topk(rec, scores, sel, n_q=n, k=k, pos0=p0, ratio=4,
                                        stride=stride))  # fmt: skip
    return sel
