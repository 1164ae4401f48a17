"""The compressors and the lightning indexer on the GPU: compressor emissions, indexer
scores and top-k, the ds4 numerics' rounding of cached rows, and what a step records
for them over a layer's device state (docs/vulkan.md#kernels).

From the per-token compressor projections (kv, gate) and the learned position bias ape,
each finished window is pooled (softmax over its tokens of score = gate + ape, per dim;
ratio 4 overlaps the previous window), normalised and rotated to the window's first
position, as the reference's emission does (docs/reference/model.md §3.4) in f32. The
ds4 numerics' storage rounding of the row (FP8 / FP4 / f16) is a separate kernel
(store_round.comp).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.forward import LayerSetup
from ds4.adapters.compute.vulkan.device import Buffer
from ds4.adapters.compute.vulkan.ops import Ops, rope_tables
from ds4.adapters.compute.vulkan.runtime import MAX_GROUPS, Recorder, VulkanRuntime, runtime
from ds4.adapters.compute.vulkan.step import DeviceCompressor, DeviceLayerState, DeviceStep, Value
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
    b = CompressorBuffers(kvb, gb, apeb, nb, cb, sb, out, d=d, ratio=ratio, n_rot=rp.n_rot,
                          eps=eps)  # fmt: skip
    at = Emission(last_row=ratio - 1, first_pos=0, rope_row=0, out_row=0, n_emit=n_emit)
    rt.run(lambda rec: record_compress(rec, b, at))
    got: F32 = out.read(np.float32, n_emit * d).reshape(n_emit, d)
    return got


@dataclass(frozen=True)
class CompressorBuffers:
    """One compressor's buffers and row shape for record_compress, built once per layer.

    kv/gate: per-token projections (rows of c*d f32, c = 2 for ratio 4 else 1); ape
    (ratio, c*d); norm (d); cos/sin: rope_tables rows; out: the emitted rows (d f32)."""

    kv: Buffer
    gate: Buffer
    ape: Buffer
    norm: Buffer
    cos: Buffer
    sin: Buffer
    out: Buffer
    d: int
    ratio: int
    n_rot: int
    eps: float


@dataclass(frozen=True, kw_only=True)
class Emission:
    """Which windows one record_compress call emits: the first one ends at kv/gate row
    last_row and starts at absolute position first_pos (a multiple of ratio: for ratio 4
    the previous window's rows are read when first_pos >= 4); emission e reads cos/sin
    row rope_row + e * rope_stride (the window's first position) and lands in out row
    out_row + e. in_ring > 0: kv/gate are ring buffers of in_ring rows, row r stored at
    r % in_ring (last_row may then be the absolute position)."""

    last_row: int
    first_pos: int
    rope_row: int
    out_row: int
    n_emit: int = 1
    rope_stride: int = 1
    in_ring: int = 0


def record_compress(rec: Recorder, b: CompressorBuffers, at: Emission) -> None:
    """Record at.n_emit consecutive emissions into rows at.out_row.. of b.out."""
    d, ratio, n_rot, eps = b.d, b.ratio, b.n_rot, b.eps
    last_row, first_pos, n_emit, in_ring = at.last_row, at.first_pos, at.n_emit, at.in_ring
    if ratio < 1 or d < 2 or d % 2 or n_rot % 2 or not 0 <= n_rot <= d:
        raise Ds4Error(f"compress: d {d}, ratio {ratio}, n_rot {n_rot} do not fit")
    if first_pos % ratio or last_row + 1 < ratio or not 1 <= n_emit <= MAX_GROUPS:
        raise Ds4Error(f"compress: window at {first_pos} (row {last_row}), {n_emit} rows")
    if ratio == 4 and first_pos >= 4 and last_row + 1 < 8:
        raise Ds4Error(f"compress: row {last_row} leaves no room for the previous window")
    if in_ring and in_ring < ratio + (4 if ratio == 4 else 0):
        raise Ds4Error(f"compress: a ring of {in_ring} rows cannot hold a window of {ratio}")
    push = struct.pack("<IIIf6I", d, ratio, n_rot, eps, last_row, first_pos, at.rope_row,
                       at.rope_stride, at.out_row, in_ring)  # fmt: skip
    bufs = [b.kv, b.gate, b.ape, b.norm, b.cos, b.sin, b.out]
    rec.dispatch("compress", bufs, push, (n_emit, 1, 1))


# -----------------------------------------------------------------------------
# The lightning indexer on the GPU: scores and top-k of the compressed rows
# (native/vulkan/indexer_scores.comp, topk.comp; docs/vulkan.md#kernels).
#
# Query t of a chunk sits at position pos0 + t and sees the n_t = (pos0 + t + 1) // ratio
# compressed rows emitted by then (rows buffer row = emission index). Scores as the
# reference's indexer_scores (f32, summed in another order); the selection as its
# top_k_mask: the k largest, lower index first among equal scores, ascending; every row
# when n_t <= k.

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
        b = IndexerBuffers(rb, qb, wb, sb, n_head=n_head, dim=dim)
        record_indexer_scores(rec, b, n_q=n_q, pos0=pos0, ratio=ratio, stride=stride,
                              w_scale=w_scale)  # fmt: skip
        rec.barrier()
        record_topk(rec, sb, selb, n_q=n_q, k=k, pos0=pos0, ratio=ratio, stride=stride)

    rt.run(record)
    scores: F32 = sb.read(np.float32, n_q * stride).reshape(n_q, stride)
    sel = selb.read(np.uint32, n_q * k).reshape(n_q, k).astype(np.int64)
    return scores, [sel[t, : min(n, k)] for t, n in enumerate(counts)]


@dataclass(frozen=True)
class IndexerBuffers:
    """A layer's indexer buffers for record_indexer_scores: rows (the compressed indexer
    rows, dim f32 each), iq (n_q, n_head, dim), weights (n_q, n_head), scores (n_q,
    stride) f32."""

    rows: Buffer
    iq: Buffer
    weights: Buffer
    scores: Buffer
    n_head: int
    dim: int


def record_indexer_scores(
    rec: Recorder, b: IndexerBuffers, *, n_q: int, pos0: int, ratio: int, stride: int,
    w_scale: float = 1.0,
) -> None:  # fmt: skip
    """Record b.scores[t, c] (rows of `stride` f32) for c < (pos0 + t + 1) // ratio; the
    weights are multiplied by w_scale (in f32) first."""
    most = (pos0 + n_q) // ratio
    if n_q < 1 or n_q > MAX_GROUPS or ratio < 1 or most > stride or most > MAX_GROUPS:
        raise Ds4Error(f"indexer: {n_q} queries, {most} rows (stride {stride}) out of range")
    if most == 0:
        return  # no query sees a row yet
    push = struct.pack("<6If", n_q, b.n_head, b.dim, pos0, ratio, stride, w_scale)
    rec.dispatch("indexer_scores", [b.rows, b.iq, b.weights, b.scores], push, (most, n_q, 1))


def record_topk(
    rec: Recorder, scores: Buffer, sel: Buffer, *, n_q: int, k: int, pos0: int, ratio: int,
    stride: int,
) -> None:  # fmt: skip
    """Record sel[t, :min(n_t, k)] (uint32 rows of k): query t's selected rows, ascending."""
    if k < 1 or n_q < 1 or n_q > MAX_GROUPS or ratio < 1:
        raise Ds4Error(f"top-k: k {k}, {n_q} queries, ratio {ratio} out of range")
    push = struct.pack("<5I", n_q, k, pos0, ratio, stride)
    rec.dispatch("topk", [scores, sel], push, (n_q, 1, 1))


# -----------------------------------------------------------------------------
# The ds4 numerics' rounding of cached rows on the GPU, in place
# (native/vulkan/store_round.comp; docs/vulkan.md#kernels).
#
# KV_ROW: the reference's f16round(fp8_kv_sim(row, n_nope)) (raw and compressed attention
# rows); INDEX_ROW: f16round(indexer_qat(row)) (indexer compressor rows); INDEX_QUERY:
# indexer_qat(iq) per 128-wide head (indexer queries). Bit for bit, except for non-finite
# values and values whose rounding passes through f32 subnormals.

MAX_DIM = 512


class StoreRounding(IntEnum):
    KV_ROW = 0
    INDEX_ROW = 1
    INDEX_QUERY = 2


def round_rows(
    x: npt.ArrayLike, mode: StoreRounding, *, n_nope: int = 0, rt: VulkanRuntime | None = None
) -> F32:
    """x (n_rows, dim) rounded as `mode` says; n_nope: KV_ROW's FP8 dims."""
    xs = np.ascontiguousarray(x, dtype=np.float32)
    if xs.ndim != 2 or xs.shape[0] < 1:
        raise Ds4Error(f"store rounding: rows {xs.shape} must be (n_rows, dim)")
    rt = rt or runtime()
    buf = rt.scratch("store_round.rows", xs.nbytes)
    buf.write(xs)
    rt.run(lambda rec: record_store_round(rec, buf, n_rows=xs.shape[0], dim=xs.shape[1],
                                          mode=mode, n_nope=n_nope))  # fmt: skip
    out: F32 = buf.read(np.float32, xs.size).reshape(xs.shape)
    return out


def record_store_round(
    rec: Recorder, rows: Buffer, *, n_rows: int, dim: int, mode: StoreRounding, row0: int = 0,
    n_nope: int = 0,
) -> None:  # fmt: skip
    """Record the in-place rounding of rows row0 .. row0 + n_rows (each of dim f32)."""
    if not 1 <= dim <= MAX_DIM or n_rows < 1 or row0 < 0:
        raise Ds4Error(f"store rounding: {n_rows} rows of {dim} (at most {MAX_DIM}) at {row0}")
    if mode is StoreRounding.KV_ROW and (n_nope % 64 or not 0 <= n_nope <= dim):
        raise Ds4Error(f"store rounding: {n_nope} FP8 dims are not whole blocks of 64 in {dim}")
    if mode is not StoreRounding.KV_ROW and dim % 128:
        raise Ds4Error(f"store rounding: the Hadamard needs rows of 128s, not {dim}")
    gx = min(n_rows, MAX_GROUPS)
    push = struct.pack("<5I", n_rows, dim, row0, int(mode), n_nope)
    rec.dispatch("store_round", [rows], push, (gx, -(-n_rows // gx), 1))


# -----------------------------------------------------------------------------
# y = x * s (+ a row of b chosen by position) on the GPU (native/vulkan/rows_affine.comp):
# the compressor score gate + ape[p % ratio] as the device forward forms it, each product
# and sum rounded once in f32 as the reference's numpy expression rounds it.

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


# ---- what a step records for a layer's compressors and indexer --------------


def compressor_inputs(
    ops: Ops, step: DeviceStep, setup: LayerSetup, h: Value, p0: int, kind: str,
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


def emit_rows(
    ops: Ops, step: DeviceStep, setup: LayerSetup, comp: DeviceCompressor, norm: str,
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
    b = CompressorBuffers(kvb, scb, zero_ape, nb, cb, sb, out, d=d, ratio=ratio,
                          n_rot=hp.n_rot, eps=hp.rms_eps)  # fmt: skip
    at = Emission(last_row=last_row, first_pos=lasts[0] + 1 - ratio, rope_row=0,
                  out_row=out_row, n_emit=n_emit)  # fmt: skip
    step.record(lambda rec: record_compress(rec, b, at))
    comp.rows.n = first + n_emit
    num = setup.numerics
    if mode is StoreRounding.INDEX_ROW and num.indexer_qat != num.kv_rounding:
        raise Ds4Error("vulkan: indexer rows need indexer QAT and f16 rounding together")
    if num.kv_rounding:
        n_nope = hp.head_dim - hp.n_rot
        step.record(lambda rec: record_store_round(rec, out, n_rows=n_emit, dim=d, mode=mode,
                    row0=out_row, n_nope=n_nope))  # fmt: skip


def indexer_choice(
    step: DeviceStep, setup: LayerSetup, st: DeviceLayerState, p0: int, n: int, iq: Value | None,
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
    b = IndexerBuffers(rows, qb, wb, scores, n_head=hp.n_indexer_head,
                       dim=hp.indexer_head_dim)  # fmt: skip
    step.record(lambda rec: record_indexer_scores(rec, b, n_q=n, pos0=p0, ratio=4,
                                                  stride=stride, w_scale=w_scale))  # fmt: skip
    step.record(lambda rec: record_topk(rec, scores, sel, n_q=n, k=k, pos0=p0, ratio=4,
                                        stride=stride))  # fmt: skip
    return sel
