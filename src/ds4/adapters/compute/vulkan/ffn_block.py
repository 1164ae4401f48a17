"""The FFN sublayer on the device (the device twin of reference/forward.py;
docs/vulkan.md#device-forward): the router's top-k (or hash) choice stays on the device
and the routed experts read it there, grouped by expert (a row decoded once per chunk of
up to 8 pairs); then the shared expert and the slot-ordered combine. fp32 numerics: f32
dots (moe.record_moe_ffn); ds4 numerics: activations quantized on the device and the
integer-dot kernels (moe.record_moe_ffn_q8)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.forward import LayerSetup
from ds4.adapters.compute.vulkan.actquant import record_quantize_for
from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.matvec import VulkanWeights, kernel_tables
from ds4.adapters.compute.vulkan.moe import (
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
from ds4.adapters.compute.vulkan.router import HASH, TOP_K, TOP_K_BIAS, hash_table, record_route
from ds4.adapters.compute.vulkan.step import Step, Value

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


def ffn_block(ops: Ops, step: Step, setup: LayerSetup, g: Value, tokens: I64) -> Value:
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
    if quantized:
        step.record(lambda rec: record_moe_ffn_q8(rec, w, scratch, gb, ids, wts, ob, n, clamp,
                                                  record_quantize_for))  # fmt: skip
    else:
        step.record(lambda rec: record_moe_ffn(rec, w, scratch, gb, ids, wts, ob, n, clamp))
    return out


def _route(ops: Ops, step: Step, setup: LayerSetup, logits: Value, tokens: I64
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
    step.record(lambda rec: record_route(rec, lb, bias, tok, table, ids, wts, n, n_expert, k,
                                         mode, scale, norm))  # fmt: skip
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
    ops: Ops, step: Step, setup: LayerSetup, w: FfnWeights, g: Value, ids: Buffer,
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
    ops: Ops, step: Step, w: FfnWeights, wt: VulkanWeights, g: Buffer, ids: Buffer, n: int,
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
