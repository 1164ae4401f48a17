"""The FFN sublayer on the device (the device twin of reference/forward.py;
docs/vulkan.md#device-forward): MoE routing (native/vulkan/router.comp), whose top-k
(or hash) choice stays on the device, then the routed experts reading it there,
grouped by expert (a row decoded once per chunk of up to 8 pairs), the shared expert
and the slot-ordered combine. fp32 numerics: f32 dots (moe.record_moe_ffn); ds4
numerics: activations quantized on the device and the integer-dot kernels
(moe.record_moe_ffn_q8).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.forward import LayerSetup
from ds4.adapters.compute.vulkan.device import Buffer
from ds4.adapters.compute.vulkan.moe import (
    FfnBuffers,
    FfnScratch,
    FfnWeights,
    ffn_scratch_sizes,
    record_moe_combine,
    record_moe_ffn,
    record_moe_ffn_q8,
    record_moe_matmul_q8,
    record_swiglu,
)
from ds4.adapters.compute.vulkan.ops import Ops
from ds4.adapters.compute.vulkan.runtime import MAX_GROUPS, Recorder, VulkanRuntime
from ds4.adapters.compute.vulkan.step import DeviceStep, Value
from ds4.adapters.compute.vulkan.weights import (
    VulkanWeights,
    kernel_tables,
    record_matmul,
    record_quantize_for,
)
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
MAX_EXPERT = 1024  # MAX_EXPERT in router.comp
MAX_K = 32
TOP_K, TOP_K_BIAS, HASH = 0, 1, 2  # router.comp modes


def route_on_device(
    logits: npt.ArrayLike, k: int, scale: float, normalize: bool, rt: VulkanRuntime, *,
    bias: npt.ArrayLike | None = None, tokens: npt.ArrayLike | None = None,
    tid2eid: npt.ArrayLike | None = None,
) -> tuple[I64, F32]:  # fmt: skip
    """ids, weights (n, k) each for logits (n, E): top-k (bias steering the choice when
    given), or hash routing when tokens and the (vocab, k) tid2eid table are given."""
    lg = np.ascontiguousarray(logits, dtype=np.float32)
    if lg.ndim != 2 or lg.shape[0] < 1:
        raise Ds4Error(f"route: logits {lg.shape} must be (n_tok, n_expert)")
    n_tok, n_expert = lg.shape
    hashed = tokens is not None or tid2eid is not None
    if hashed and (tokens is None or tid2eid is None or bias is not None):
        raise Ds4Error("route: hash routing takes both tokens and tid2eid, and no bias")
    mode = HASH if hashed else TOP_K if bias is None else TOP_K_BIAS
    check_route(n_tok, n_expert, k, mode)
    arrays: list[npt.NDArray[np.generic]] = [lg]
    if bias is not None:
        b = np.ascontiguousarray(bias, dtype=np.float32)
        if b.shape != (n_expert,):
            raise Ds4Error(f"route: bias {b.shape} does not fit {n_expert} experts")
        arrays.append(b)
    if hashed:
        tok = np.ascontiguousarray(tokens, dtype=np.int64).reshape(-1)
        table = hash_table(np.asarray(tid2eid), n_expert, k)
        if tok.shape != (n_tok,) or tok.min() < 0 or tok.max() >= table.shape[0]:
            raise Ds4Error(f"route: token ids must be {n_tok} values in 0..{table.shape[0] - 1}")
        arrays += [tok.astype(np.int32), table]
    bufs = [rt.scratch(f"route.in{i}", a.nbytes) for i, a in enumerate(arrays)]
    for buf, a in zip(bufs, arrays, strict=True):
        buf.write(a)
    ids, wts = rt.scratch("route.ids", n_tok * k * 4), rt.scratch("route.wts", n_tok * k * 4)
    lb = bufs[0]
    bb = bufs[1] if mode == TOP_K_BIAS else lb
    tb, hb = (bufs[1], bufs[2]) if mode == HASH else (lb, lb)
    rb, r = RouteBuffers(lb, bb, tb, hb, ids, wts), Routing(k, mode, scale, normalize)
    rt.run(lambda rec: record_route(rec, rb, r, n_tok, n_expert))
    out_ids: I64 = ids.read(np.int32, n_tok * k).reshape(n_tok, k).astype(np.int64)
    out_wts: F32 = wts.read(np.float32, n_tok * k).reshape(n_tok, k)
    return out_ids, out_wts


def hash_table(tid2eid: npt.NDArray[np.generic], n_expert: int, k: int) -> npt.NDArray[np.int32]:
    """The (vocab, k) int32 table as the router reads it, every id checked in range
    (the shader trusts it: a wrong id would address outside the expert tensor)."""
    raw = np.ascontiguousarray(tid2eid)
    table: npt.NDArray[np.int32] = np.ascontiguousarray(
        raw.view("<i4") if raw.dtype == np.uint8 else raw, dtype=np.int32
    )
    if table.ndim != 2 or table.shape[1] != k or table.size == 0:
        raise Ds4Error(f"tid2eid table {table.shape} is not (vocab, {k})")
    if table.min() < 0 or table.max() >= n_expert:
        raise Ds4Error(f"tid2eid table holds expert ids outside 0..{n_expert - 1}")
    return table


@dataclass(frozen=True)
class RouteBuffers:
    """A layer's routing buffers: logits (n, E) in, ids (n, k) int32 and wts (n, k) f32
    out; bias (E) is read in TOP_K_BIAS mode only, tokens (n,) int32 and tid2eid (from
    hash_table) in HASH mode only (otherwise any buffer)."""

    logits: Buffer
    bias: Buffer
    tokens: Buffer
    tid2eid: Buffer
    ids: Buffer
    wts: Buffer


@dataclass(frozen=True)
class Routing:
    """How a layer routes: top k, the router.comp mode (TOP_K, TOP_K_BIAS or HASH), the
    weights' scale and whether they are renormalised first."""

    k: int
    mode: int
    scale: float
    normalize: bool


def record_router(
    rec: Recorder, gate_inp: VulkanWeights, tables: list[Buffer], g: Buffer, b: RouteBuffers,
    r: Routing, n_tok: int,
) -> None:  # fmt: skip
    """Record the gate product b.logits = gate_inp g (fp32 dots), a barrier, and the
    routing."""
    record_matmul(rec, gate_inp, g, b.logits, n_tok, tables)
    rec.barrier()
    record_route(rec, b, r, n_tok, gate_inp.rows)


def record_route(rec: Recorder, b: RouteBuffers, r: Routing, n_tok: int, n_expert: int) -> None:
    """Record the routing of b.logits (n, E) into b.ids and b.wts."""
    k, mode = r.k, r.mode
    check_route(n_tok, n_expert, k, mode)
    n_vocab = max(b.tid2eid.size // (4 * k), 1)  # rows of the table (HASH mode)
    push = struct.pack("<4IfII", n_tok, n_expert, k, mode, r.scale, int(r.normalize), n_vocab)
    gx = min(n_tok, MAX_GROUPS)
    rec.dispatch("router", [b.logits, b.bias, b.tokens, b.tid2eid, b.ids, b.wts], push,
                 (gx, -(-n_tok // gx), 1))  # fmt: skip


def check_route(n_tok: int, n_expert: int, k: int, mode: int) -> None:
    if not 1 <= n_expert <= MAX_EXPERT or not 1 <= k <= min(MAX_K, n_expert) or n_tok < 1:
        raise Ds4Error(f"route: {n_expert} experts, top {k} (experts 1..{MAX_EXPERT}, "
                       f"k 1..{MAX_K} and at most the experts)")  # fmt: skip
    if mode not in (TOP_K, TOP_K_BIAS, HASH):
        raise Ds4Error(f"route: unknown mode {mode}")


# ---- what a step records for one layer's FFN --------------------------------


def ffn_block(ops: Ops, step: DeviceStep, setup: LayerSetup, g: Value, tokens: I64) -> Value:
    """g (n, D): the ffn-normed input; returns (n, D)."""
    hp, pre = setup.hp, setup.prefix
    n, k = g.shape[0], hp.n_expert_used
    logits = ops.mm(step, pre + "ffn_gate_inp.weight", g)
    ids, wts = _route(ops, step, setup, logits, tokens)
    w = _weights(ops, setup)
    out = step.new((n, hp.n_embd))
    gb, ob = step.dev(g), out.buf
    assert ob is not None
    quantized = ops.store.activation_quant
    if quantized and n == 1:  # decode: one workgroup per (row, pair); same bits as grouped
        _experts_q8(ops, step, setup, w, g, ids, wts, ob)
        return out
    sizes = ffn_scratch_sizes(w, n, k, quantized=quantized)
    scratch = FfnScratch(n, k, {name: step.alloc(size) for name, size in sizes.items()})
    clamp = setup.clamp
    io = FfnBuffers(gb, ids, wts, ob)
    if quantized:
        step.record(lambda rec: record_moe_ffn_q8(rec, w, scratch, io, n, clamp,
                                                  record_quantize_for))  # fmt: skip
    else:
        step.record(lambda rec: record_moe_ffn(rec, w, scratch, io, n, clamp))
    return out


def _route(ops: Ops, step: DeviceStep, setup: LayerSetup, logits: Value, tokens: I64
           ) -> tuple[Buffer, Buffer]:  # fmt: skip
    """ids (n, k) int32 and weights (n, k) f32 on the device, as routing.route forms them."""
    hp, pre, store = setup.hp, setup.prefix, ops.store
    n, n_expert, k = logits.shape[0], logits.shape[1], hp.n_expert_used
    lb = step.dev(logits)
    bias = tok = table = lb
    if setup.is_hash:
        mode = HASH
        name = pre + "ffn_gate_tid2eid.weight"
        table = ops.table(name, lambda: hash_table(store.raw_tensor(name), n_expert, k))
        tok = step.dev(step.host(tokens.astype(np.int32), np.int32))
    elif store.has(pre + "exp_probs_b.bias"):
        mode, bias = TOP_K_BIAS, ops.vec(pre + "exp_probs_b.bias")
    else:
        mode = TOP_K
    ids, wts = step.alloc(n * k * 4), step.alloc(n * k * 4)
    scale, norm = hp.expert_weights_scale, hp.expert_weights_norm
    b, r = RouteBuffers(lb, bias, tok, table, ids, wts), Routing(k, mode, scale, norm)
    step.record(lambda rec: record_route(rec, b, r, n, n_expert))
    return ids, wts


def _weights(ops: Ops, setup: LayerSetup) -> FfnWeights:
    pre, store = setup.prefix, ops.store

    def make() -> FfnWeights:
        gate = store.device(pre + "ffn_gate_exps.weight")
        return FfnWeights(
            gate, store.device(pre + "ffn_up_exps.weight"),
            store.device(pre + "ffn_down_exps.weight"), setup.hp.n_expert,
            shared=(store.device(pre + "ffn_gate_shexp.weight"),
                    store.device(pre + "ffn_up_shexp.weight"),
                    store.device(pre + "ffn_down_shexp.weight")),
        )  # fmt: skip

    return ops.cached(pre + "ffn", make)


def _experts_q8(
    ops: Ops, step: DeviceStep, setup: LayerSetup, w: FfnWeights, g: Value, ids: Buffer,
    wts: Buffer, out: Buffer,
) -> None:  # fmt: skip
    """ds4 numerics: each token's activation quantized once per weight type, the
    expert-indexed integer-dot products per (token, slot), weighted SwiGLU, the down
    product on the quantized mid rows, the shared expert, the combine."""
    hp, pre = setup.hp, setup.prefix
    n, k, ff, clamp = g.shape[0], hp.n_expert_used, w.ff, setup.clamp
    n_pairs, gb = n * k, step.dev(g)
    halves = [_expert_half(ops, step, w, wt, gb, ids, n, k) for wt in (w.gate_exps, w.up_exps)]
    mid = step.alloc(n_pairs * ff * 4)
    step.record(lambda rec: record_swiglu(rec, halves[0], halves[1], wts, mid, n_pairs, ff,
                                          clamp, True))  # fmt: skip
    down = w.down_exps
    acts = ops.act_buffers(step, down.view(0, w.dim), n_pairs, n_pairs)
    tables = kernel_tables(ops.rt, down)
    step.record(lambda rec: record_quantize_for(rec, down, mid, acts, n_pairs))
    step.record(lambda rec: record_moe_matmul_q8(rec, down, w.n_expert, acts, ids, n_pairs, 1,
                                                 tables))  # fmt: skip
    sg = ops.mm(step, pre + "ffn_gate_shexp.weight", g)
    su = ops.mm(step, pre + "ffn_up_shexp.weight", g)
    ffs = sg.shape[1]
    smid = step.new((n, ffs))
    sgb, sub, smb = step.dev(sg), step.dev(su), smid.buf
    assert smb is not None
    step.record(lambda rec: record_swiglu(rec, sgb, sub, sgb, smb, n, ffs, clamp, False))
    sout = step.dev(ops.mm(step, pre + "ffn_down_shexp.weight", smid))
    contrib = acts[2]
    step.record(lambda rec: record_moe_combine(rec, contrib, sout, out, n, k, hp.n_embd, True))


def _expert_half(
    ops: Ops, step: DeviceStep, w: FfnWeights, wt: VulkanWeights, g: Buffer, ids: Buffer, n: int,
    k: int,
) -> Buffer:  # fmt: skip
    """gate or up: y (n * k, ff) = W_{ids[q]} . quantize(g[q // k])."""
    n_pairs = n * k
    acts = ops.act_buffers(step, wt.view(0, w.ff), n, n_pairs)
    tables = kernel_tables(ops.rt, wt)
    step.record(lambda rec: record_quantize_for(rec, wt, g, acts, n))
    step.record(lambda rec: record_moe_matmul_q8(rec, wt, w.n_expert, acts, ids, n_pairs, k,
                                                 tables))  # fmt: skip
    return acts[2]
