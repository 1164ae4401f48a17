"""The FFN sublayer on the native kernels: one-token decode runs the routed experts in
a single moe_forward call; prefill groups tokens by expert (one native matmul per
expert and matrix, the reference composition). Routing and the shared expert are the
reference's own steps, their products native through the weight store."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute import cpu_kernels
from ds4.adapters.compute.cpu.native_weights import NativeWeightStore
from ds4.adapters.compute.reference.attention_layer import LayerSetup
from ds4.adapters.compute.reference.ffn_layer import route_tokens, routed_experts, shared_expert

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


def native_ffn(store: NativeWeightStore, setup: LayerSetup, g: F32, tokens: I64) -> F32:
    ids, wts = route_tokens(setup, g, tokens)
    pre = setup.prefix
    gate = store.experts(pre + "ffn_gate_exps.weight")
    up = store.experts(pre + "ffn_up_exps.weight")
    down = store.experts(pre + "ffn_down_exps.weight")
    fused = all(p.ggml_type in cpu_kernels.Q8K_TYPES for p in (gate, up, down))
    if fused and g.shape[0] == 1:
        moe = cpu_kernels.moe_forward(
            g[0], gate, up, down, ids[0], wts[0],
            clamp=setup.hp.swiglu_clamp[setup.layer], threads=store.threads, impl=store.impl,
        )[None, :]  # fmt: skip
    else:
        moe = routed_experts(setup, g, ids, wts)
    out: F32 = (moe + shared_expert(setup, g)).astype(np.float32)
    return out
