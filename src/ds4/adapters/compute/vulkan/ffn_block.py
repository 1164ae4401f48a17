"""The FFN sublayer on the device (the device twin of reference/ffn_layer.py;
docs/vulkan.md#device-forward): router, routed experts grouped by expert, shared expert."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.attention_layer import LayerSetup
from ds4.adapters.compute.reference.ffn_layer import route_logits
from ds4.adapters.compute.vulkan.ops import Ops
from ds4.adapters.compute.vulkan.step import Step, Value
from ds4.domain.engine_math.routing import clamped_swiglu

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

FALLBACK_ROUTER = "router top-k"
FALLBACK_SWIGLU = "clamped SwiGLU"
FALLBACK_MOE_SUM = "expert sum + shared expert add"


def ffn_block(ops: Ops, step: Step, setup: LayerSetup, g: Value, tokens: I64) -> Value:
    """g (n, D): the ffn-normed input; returns (n, D)."""
    hp, pre = setup.hp, setup.prefix
    n = g.shape[0]
    logits = ops.mm(step, pre + "ffn_gate_inp.weight", g)
    step.fallback(FALLBACK_ROUTER)
    (lg,) = step.np(logits)
    ids, wts = route_logits(setup, lg, tokens)

    experts = [int(e) for e in np.unique(ids)]
    picks = [np.nonzero(ids == e) for e in experts]
    halves: list[tuple[Value, Value]] = []
    for e, (tok, _slot) in zip(experts, picks, strict=True):
        x = ops.gather_rows(step, g, tok)
        halves.append((ops.mm(step, pre + "ffn_gate_exps.weight", x, expert=e),
                       ops.mm(step, pre + "ffn_up_exps.weight", x, expert=e)))  # fmt: skip
    shared = (ops.mm(step, pre + "ffn_gate_shexp.weight", g),
              ops.mm(step, pre + "ffn_up_shexp.weight", g))  # fmt: skip
    step.fallback(FALLBACK_SWIGLU)
    got = step.np(*(v for pair in [*halves, shared] for v in pair))
    mids = []
    for i, (tok, slot) in enumerate(picks):
        mid = clamped_swiglu(got[2 * i], got[2 * i + 1], setup.clamp)
        mids.append(step.host((mid * wts[tok, slot][:, None]).astype(np.float32)))
    shared_mid = step.host(clamped_swiglu(got[-2], got[-1], setup.clamp))

    downs = [ops.mm(step, pre + "ffn_down_exps.weight", m, expert=e)
             for e, m in zip(experts, mids, strict=True)]  # fmt: skip
    shared_out = ops.mm(step, pre + "ffn_down_shexp.weight", shared_mid)
    step.fallback(FALLBACK_MOE_SUM)
    outs = step.np(*downs, shared_out)
    contrib = np.zeros((n, hp.n_expert_used, hp.n_embd), dtype=np.float32)
    for (tok, slot), y in zip(picks, outs[:-1], strict=True):
        contrib[tok, slot] = y
    moe = np.zeros((n, hp.n_embd), dtype=np.float32)
    for s in range(hp.n_expert_used):
        moe = (moe + contrib[:, s]).astype(np.float32)
    return step.host((moe + outs[-1]).astype(np.float32))
