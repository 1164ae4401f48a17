"""The attention sublayer on the device over a DeviceLayerState (the device twin of
reference/attention_layer.py; docs/vulkan.md#device-forward).

All of a chunk's raw rows and compressor inputs are written into the state first, then
the compressed rows are emitted in position order, then each token attends: token t
only ever reads rows at positions <= its own, so this equals the reference's token by
token order. Host fallbacks are marked `step.fallback(...)`.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.attention_layer import (
    LayerSetup,
    compressed_row,
    store_row,
    window_start,
)
from ds4.adapters.compute.vulkan.device_state import DeviceCompressor, DeviceLayerState
from ds4.adapters.compute.vulkan.ops import Ops
from ds4.adapters.compute.vulkan.step import Step, Value
from ds4.domain.engine_math.attention import indexer_scores, top_k_mask
from ds4.domain.engine_math.lowprec import indexer_qat

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

FALLBACK_KV_ROUNDING = "KV row rounding (FP8/f16)"
FALLBACK_APE = "compressor score + ape"
FALLBACK_EMIT = "compressor pooling (emit)"
FALLBACK_INDEXER = "indexer scores + top-k"
FALLBACK_INDEXER_QAT = "indexer query QAT"


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
    if setup.numerics.kv_rounding:
        step.fallback(FALLBACK_KV_ROUNDING)
        (rows,) = step.np(kv)
        kv = step.host(store_row(setup, rows.reshape(n, Dh)))

    p0 = int(positions[0])
    end = p0 + n
    raw = st.raw.reserve(step, end)
    step.copy(step.dev(kv), raw, n * Dh * 4, 0, st.raw.offset(p0))
    st.raw.n = end

    iq = iw = None
    if st.attn is not None:
        _compressor_inputs(ops, step, setup, h, positions, "attn_compressor", st.attn)
    if st.index is not None:
        _compressor_inputs(ops, step, setup, h, positions, "indexer_compressor", st.index)
        iq = ops.mm(step, pre + "indexer.attn_q_b.weight", qrn)
        ops.rope(step, iq, (n, hp.n_indexer_head, hp.indexer_head_dim), tables, hp.n_rot)
        iw = ops.mm(step, pre + "indexer.proj.weight", h)
    for comp, norm in ((st.attn, "attn_compressor_norm.weight"),
                       (st.index, "indexer_compressor_norm.weight")):  # fmt: skip
        if comp is not None:
            _emit_rows(step, setup, comp, norm, positions)

    chosen = _indexer_choice(step, setup, st, positions, iq, iw)
    heads = step.new((n, H, Dh))
    assert heads.buf is not None and q.buf is not None
    scale = 1.0 / math.sqrt(Dh)
    for t in range(n):
        p = int(positions[t])
        rows = _attention_rows(step, st, p, chosen[t] if chosen is not None else None)
        off = t * H * Dh * 4
        ops.attend(step, q.buf, off, rows, pre + "attn_sinks.weight", heads.buf, off, H, Dh,
                   scale)  # fmt: skip
    ops.rope(step, heads, (n, H, Dh), tables, hp.n_rot, inverse=True)

    gin, lo = hp.group_in_dim, hp.o_lora_rank
    low = step.new((n, hp.n_out_group * lo))
    for g in range(hp.n_out_group):
        part = ops.columns(step, heads, g * gin, gin)
        y = ops.mm(step, pre + "attn_output_a.weight", part, rows=slice(g * lo, (g + 1) * lo))
        ops.place_columns(step, y, low, g * lo)
    return ops.mm(step, pre + "attn_output_b.weight", low)


def _compressor_inputs(
    ops: Ops, step: Step, setup: LayerSetup, h: Value, positions: I64, kind: str,
    comp: DeviceCompressor,
) -> None:  # fmt: skip
    """Append each token's compressor inputs (kv projection, gate + ape) to the state."""
    n, p0 = h.shape[0], int(positions[0])
    kv = ops.mm(step, f"{setup.prefix}{kind}_kv.weight", h)
    gate = ops.mm(step, f"{setup.prefix}{kind}_gate.weight", h)
    step.fallback(FALLBACK_APE)
    (g,) = step.np(gate)
    ape = setup.vec(f"{kind}_ape.weight")
    score = step.host((g + ape[positions % comp.ratio]).astype(np.float32))
    for src, rows in ((kv, comp.kv), (score, comp.score)):
        buf = rows.reserve(step, p0 + n)
        step.copy(step.dev(src), buf, n * rows.row_bytes, 0, rows.offset(p0))
        rows.n = p0 + n


def _emit_rows(step: Step, setup: LayerSetup, comp: DeviceCompressor, norm: str,
               positions: I64) -> None:  # fmt: skip
    """The compressed rows the chunk completes, pooled on the host (fallback) from the
    device-resident inputs and appended to the device rows."""
    lasts = [int(p) for p in positions if (int(p) + 1) % comp.ratio == 0]
    if not lasts:
        return
    step.fallback(FALLBACK_EMIT)
    lo = window_start(comp.ratio, lasts[0])
    hi = lasts[-1] + 1
    spans = []
    for rows in (comp.kv, comp.score):
        v = step.new((hi - lo, comp.width))
        assert rows.buf is not None and v.buf is not None
        step.copy(rows.buf, v.buf, (hi - lo) * rows.row_bytes, rows.offset(lo), 0)
        spans.append(v)
    kv, sc = step.np(*spans)
    out = rows_dst = comp.rows
    first = lasts[0] // comp.ratio  # index of the first row emitted here
    buf = rows_dst.reserve(step, first + len(lasts))
    made = []
    for last in lasts:
        a = window_start(comp.ratio, last)
        made.append(compressed_row(setup, kv[a - lo : last + 1 - lo], sc[a - lo : last + 1 - lo],
                                   comp.ratio, comp.row_width, norm, last))  # fmt: skip
    step.upload_into(np.stack(made).astype(np.float32), buf, out.offset(first))
    out.n = first + len(lasts)


def _indexer_choice(
    step: Step, setup: LayerSetup, st: DeviceLayerState, positions: I64, iq: Value | None,
    iw: Value | None,
) -> list[I64 | None] | None:  # fmt: skip
    """Per token, the compressed rows the indexer keeps (None: all of them)."""
    hp = setup.hp
    if st.index is None or st.attn is None or iq is None or iw is None:
        return None
    counts = [(int(p) + 1) // st.attn.ratio for p in positions]
    if max(counts) <= hp.indexer_top_k:
        return None
    step.fallback(FALLBACK_INDEXER)
    n_idx = (int(positions[-1]) + 1) // 4
    idx = st.index.rows
    v = step.new((n_idx, st.index.row_width))
    assert idx.buf is not None and v.buf is not None
    step.copy(idx.buf, v.buf, n_idx * idx.row_bytes, idx.offset(0), 0)
    index_rows, q, w = step.np(v, iq, iw)
    q = q.reshape(len(positions), hp.n_indexer_head, hp.indexer_head_dim)
    if setup.numerics.indexer_qat:
        step.fallback(FALLBACK_INDEXER_QAT)
        q = indexer_qat(q)
    scale = np.float32(1.0 / math.sqrt(hp.indexer_head_dim * hp.n_indexer_head))
    w = (w * scale).astype(np.float32)
    out: list[I64 | None] = []
    for t, p in enumerate(positions):
        if counts[t] <= hp.indexer_top_k:
            out.append(None)
            continue
        rows = index_rows[: (int(p) + 1) // 4]
        out.append(top_k_mask(indexer_scores(rows, q[t], w[t]), hp.indexer_top_k))
    return out


def _attention_rows(step: Step, st: DeviceLayerState, p: int, chosen: I64 | None) -> Value:
    """The rows token p attends: its raw window, then the compressed rows (all, or the
    indexer's choice), copied into one contiguous value."""
    first = max(0, p + 1 - st.n_swa)
    n_raw = p + 1 - first
    comp = st.attn
    n_comp = 0 if comp is None else (p + 1) // comp.ratio
    picks = None if chosen is None else chosen.tolist()
    total = n_raw + (n_comp if picks is None else len(picks))
    rows = step.new((total, st.raw.width))
    assert rows.buf is not None and st.raw.buf is not None
    rb = st.raw.row_bytes
    step.copy(st.raw.buf, rows.buf, n_raw * rb, st.raw.offset(first), 0)
    if comp is not None and n_comp:
        src = comp.rows.buf
        assert src is not None
        if picks is None:
            step.copy(src, rows.buf, n_comp * rb, comp.rows.offset(0), n_raw * rb)
        else:
            for i, r in enumerate(picks):
                step.copy(src, rows.buf, rb, comp.rows.offset(int(r)), (n_raw + i) * rb)
    return rows
