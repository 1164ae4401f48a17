"""Tensor names and layouts: transformers' in-memory DeepseekV4 names <-> DeepSeek's hub names.

The official names are those of DeepSeek's release (``embed.weight``,
``layers.N.attn.wq_a.weight``, ``layers.N.ffn.experts.E.w1.weight``, ``hc_head_fn``, ...).
Only two layout changes exist: HF stores the routed experts stacked, with gate and up
fused (``gate_up_proj`` (E, 2F, D), gate rows first; ``down_proj`` (E, D, F)), where the hub
has one (F, D) / (D, F) matrix per expert; and HF keeps ``tid2eid`` as int64 where the hub
stores int32. Every other tensor is the same array under another name.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.generic]

# Whole-model tensors: HF in-memory name -> hub name.
_TOP = {
    "model.embed_tokens.weight": "embed.weight",
    "lm_head.weight": "head.weight",
    "model.norm.weight": "norm.weight",
    "model.hc_head.hc_fn": "hc_head_fn",
    "model.hc_head.hc_base": "hc_head_base",
    "model.hc_head.hc_scale": "hc_head_scale",
}

# Per-layer suffixes (after ``model.layers.N.`` / ``layers.N.``).
_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "attn_hc.fn": "hc_attn_fn",
    "attn_hc.base": "hc_attn_base",
    "attn_hc.scale": "hc_attn_scale",
    "ffn_hc.fn": "hc_ffn_fn",
    "ffn_hc.base": "hc_ffn_base",
    "ffn_hc.scale": "hc_ffn_scale",
    "self_attn.q_a_proj.weight": "attn.wq_a.weight",
    "self_attn.q_a_norm.weight": "attn.q_norm.weight",
    "self_attn.q_b_proj.weight": "attn.wq_b.weight",
    "self_attn.kv_proj.weight": "attn.wkv.weight",
    "self_attn.kv_norm.weight": "attn.kv_norm.weight",
    "self_attn.o_a_proj.weight": "attn.wo_a.weight",
    "self_attn.o_b_proj.weight": "attn.wo_b.weight",
    "self_attn.sinks": "attn.attn_sink",
    "self_attn.compressor.kv_proj.weight": "attn.compressor.wkv.weight",
    "self_attn.compressor.gate_proj.weight": "attn.compressor.wgate.weight",
    "self_attn.compressor.position_bias": "attn.compressor.ape",
    "self_attn.compressor.kv_norm.weight": "attn.compressor.norm.weight",
    "self_attn.compressor.indexer.kv_proj.weight": "attn.indexer.compressor.wkv.weight",
    "self_attn.compressor.indexer.gate_proj.weight": "attn.indexer.compressor.wgate.weight",
    "self_attn.compressor.indexer.position_bias": "attn.indexer.compressor.ape",
    "self_attn.compressor.indexer.kv_norm.weight": "attn.indexer.compressor.norm.weight",
    "self_attn.compressor.indexer.q_b_proj.weight": "attn.indexer.wq_b.weight",
    "self_attn.compressor.indexer.scorer.weights_proj.weight": "attn.indexer.weights_proj.weight",
    "mlp.gate.weight": "ffn.gate.weight",
    "mlp.gate.e_score_correction_bias": "ffn.gate.bias",
    "mlp.gate.tid2eid": "ffn.gate.tid2eid",
    "mlp.shared_experts.gate_proj.weight": "ffn.shared_experts.w1.weight",
    "mlp.shared_experts.up_proj.weight": "ffn.shared_experts.w3.weight",
    "mlp.shared_experts.down_proj.weight": "ffn.shared_experts.w2.weight",
}
_LAYER_BACK = {v: k for k, v in _LAYER.items()}
_TOP_BACK = {v: k for k, v in _TOP.items()}

_HF_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
_HUB_LAYER = re.compile(r"^layers\.(\d+)\.(.+)$")
_HUB_EXPERT = re.compile(r"^ffn\.experts\.(\d+)\.(w[123])\.weight$")


def hf_to_official(hf: dict[str, Array]) -> dict[str, Array]:
    """Rename (and re-layout) an HF ``state_dict`` (as numpy) into DeepSeek hub tensors."""
    out: dict[str, Array] = {}
    for name, value in hf.items():
        if name in _TOP:
            out[_TOP[name]] = value
            continue
        m = _HF_LAYER.match(name)
        if m is None:
            raise KeyError(f"unexpected HF tensor {name!r}")
        layer, suffix = m.group(1), m.group(2)
        prefix = f"layers.{layer}."
        if suffix == "mlp.experts.gate_up_proj":
            ff = value.shape[1] // 2
            for e in range(value.shape[0]):
                out[f"{prefix}ffn.experts.{e}.w1.weight"] = np.ascontiguousarray(value[e, :ff])
                out[f"{prefix}ffn.experts.{e}.w3.weight"] = np.ascontiguousarray(value[e, ff:])
        elif suffix == "mlp.experts.down_proj":
            for e in range(value.shape[0]):
                out[f"{prefix}ffn.experts.{e}.w2.weight"] = np.ascontiguousarray(value[e])
        elif suffix == "mlp.gate.tid2eid":
            out[prefix + _LAYER[suffix]] = value.astype(np.int32)
        elif suffix in _LAYER:
            out[prefix + _LAYER[suffix]] = value
        else:
            raise KeyError(f"unexpected HF tensor {name!r}")
    return out


def official_to_hf(hub: dict[str, Array]) -> dict[str, Array]:
    """Inverse of :func:`hf_to_official` (experts re-stacked, tid2eid back to int64)."""
    out: dict[str, Array] = {}
    experts: dict[tuple[str, str], dict[int, Array]] = {}
    for name, value in hub.items():
        if name in _TOP_BACK:
            out[_TOP_BACK[name]] = value
            continue
        m = _HUB_LAYER.match(name)
        if m is None:
            raise KeyError(f"unexpected hub tensor {name!r}")
        layer, suffix = m.group(1), m.group(2)
        e = _HUB_EXPERT.match(suffix)
        if e is not None:
            experts.setdefault((layer, e.group(2)), {})[int(e.group(1))] = value
        elif suffix == "ffn.gate.tid2eid":
            out[f"model.layers.{layer}.{_LAYER_BACK[suffix]}"] = value.astype(np.int64)
        elif suffix in _LAYER_BACK:
            out[f"model.layers.{layer}.{_LAYER_BACK[suffix]}"] = value
        else:
            raise KeyError(f"unexpected hub tensor {name!r}")
    for layer in sorted({k[0] for k in experts}, key=int):

        def stack(kind: str, layer: str = layer) -> Array:
            by_id = experts[(layer, kind)]
            return np.stack([by_id[i] for i in range(len(by_id))])

        prefix = f"model.layers.{layer}.mlp.experts."
        out[prefix + "gate_up_proj"] = np.concatenate([stack("w1"), stack("w3")], axis=1)
        out[prefix + "down_proj"] = stack("w2")
    return out
