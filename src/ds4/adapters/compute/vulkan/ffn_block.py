"""The FFN sublayer on the device (the device twin of reference/ffn_layer.py;
docs/vulkan.md#device-forward): the router's top-k (or hash) choice stays on the device
and the routed experts read it there, grouped by expert; then the shared expert and the
slot-ordered combine. fp32 numerics: f32 dots (moe.record_moe_ffn); ds4 numerics: the
activations quantized on the device and the integer-dot expert kernels."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.attention_layer import LayerSetup
from ds4.adapters.compute.vulkan.actquant import record_quantize_for
from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.matvec import VulkanWeights, kernel_tables
from ds4.adapters.compute.vulkan.moe import (
    FfnScratch,
    FfnWeights,
    chunk_table_bytes,
    record_moe_combine,
    record_moe_ffn,
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
    if not ops.store.activation_quant:
        scratch = _scratch(step, w, n, k)
        clamp = setup.clamp
        step.record(lambda rec: record_moe_ffn(rec, w, scratch, gb, ids, wts, ob, n, clamp))
        return out
    _experts_q8(ops, step, setup, w, g, ids, wts, ob)
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


def _scratch(step: Step, w: FfnWeights, n_tok: int, k: int) -> FfnScratch:
    """moe.ffn_scratch's buffers, from the step's pool."""
    n_pairs, ffs = n_tok * k, (w.shared[0].rows if w.shared is not None else 1)
    sizes = {"perm": n_pairs * 4, "chunks": chunk_table_bytes(n_pairs, w.n_expert),
             "gate": n_pairs * w.ff * 4, "up": n_pairs * w.ff * 4, "mid": n_pairs * w.ff * 4,
             "contrib": n_pairs * w.dim * 4, "sh_gate": n_tok * ffs * 4,
             "sh_up": n_tok * ffs * 4, "sh_mid": n_tok * ffs * 4,
             "sh_out": n_tok * w.dim * 4}  # fmt: skip
    return FfnScratch(n_tok, k, {name: step.alloc(size) for name, size in sizes.items()})


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
