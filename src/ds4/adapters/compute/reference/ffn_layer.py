"""The FFN sublayer: routed MoE (hash or biased top-k) plus the shared expert
(docs/reference/model.md §3.8–3.9)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.attention_layer import LayerSetup
from ds4.domain.engine_math.layers import clamped_swiglu, route

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


def ffn_sublayer(setup: LayerSetup, g: F32, tokens: I64) -> F32:
    """g (n, D): the ffn-normed input; tokens (n,) ids (hash routing). Returns (n, D)."""
    ids, wts = route_tokens(setup, g, tokens)
    out: F32 = (routed_experts(setup, g, ids, wts) + shared_expert(setup, g)).astype(np.float32)
    return out


def route_tokens(setup: LayerSetup, g: F32, tokens: I64) -> tuple[I64, F32]:
    """Chosen expert ids and weights, (n, k) each, for the ffn-normed input g."""
    return route_logits(setup, setup.mm("ffn_gate_inp.weight", g), tokens)


def route_logits(setup: LayerSetup, logits: F32, tokens: I64) -> tuple[I64, F32]:
    """Expert ids and weights (n, k) from the router logits (n, n_expert)."""
    hp, pre, w = setup.hp, setup.prefix, setup.weights
    n = logits.shape[0]
    bias = w.small(pre + "exp_probs_b.bias") if w.has(pre + "exp_probs_b.bias") else None
    hashed = w.int_rows(pre + "ffn_gate_tid2eid.weight", tokens) if setup.is_hash else None
    ids = np.empty((n, hp.n_expert_used), dtype=np.int64)
    wts = np.empty((n, hp.n_expert_used), dtype=np.float32)
    for t in range(n):
        ids[t], wts[t] = route(
            logits[t],
            None if hashed is not None else bias,
            hashed[t] if hashed is not None else None,
            hp.n_expert_used,
            hp.expert_weights_scale,
            hp.expert_weights_norm,
        )
    return ids, wts


def routed_experts(setup: LayerSetup, g: F32, ids: I64, wts: F32) -> F32:
    """The routed-expert sum (n, D): one pass per used expert over the tokens that chose
    it, then a per-token sum in slot order."""
    hp, pre, w = setup.hp, setup.prefix, setup.weights
    n = g.shape[0]
    clamp = setup.clamp
    contrib = np.zeros((n, hp.n_expert_used, hp.n_embd), dtype=np.float32)
    for e in np.unique(ids):
        tok, slot = np.nonzero(ids == e)
        x = g[tok]
        gate = w.matmul(pre + "ffn_gate_exps.weight", x, expert=int(e))
        up = w.matmul(pre + "ffn_up_exps.weight", x, expert=int(e))
        mid = (clamped_swiglu(gate, up, clamp) * wts[tok, slot][:, None]).astype(np.float32)
        contrib[tok, slot] = w.matmul(pre + "ffn_down_exps.weight", mid, expert=int(e))
    moe = np.zeros((n, hp.n_embd), dtype=np.float32)
    for s in range(hp.n_expert_used):
        moe = (moe + contrib[:, s]).astype(np.float32)
    return moe


def shared_expert(setup: LayerSetup, g: F32) -> F32:
    clamp = setup.clamp
    shared_mid = clamped_swiglu(
        setup.mm("ffn_gate_shexp.weight", g), setup.mm("ffn_up_shexp.weight", g), clamp
    )
    return setup.mm("ffn_down_shexp.weight", shared_mid)
