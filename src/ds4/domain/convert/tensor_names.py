"""Checkpoint tensor names -> ds4 GGUF names (docs/reference/formats.md §3.5,
docs/oracle/hf_deepseek_v4.md §2).

Every input name is first brought to the release's ("hub") spelling; `save_pretrained`
differs from it only in a handful of top-level names and one per-layer quirk. Routed
experts are stored one matrix per expert and stacked on a leading axis in the GGUF.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# save_pretrained spellings that are not the hub's.
_HF_TOP_LEVEL = {
    "model.embed_tokens.weight": "embed.weight",
    "lm_head.weight": "head.weight",
    "model.norm.weight": "norm.weight",
    "model.hc_head.hc_fn": "hc_head_fn",
    "model.hc_head.hc_base": "hc_head_base",
    "model.hc_head.hc_scale": "hc_head_scale",
}
_HF_LAYER_QUIRKS = {"attn.norm.weight": "attn.kv_norm.weight"}

_TOP_LEVEL = {
    "embed.weight": "token_embd.weight",
    "head.weight": "output.weight",
    "norm.weight": "output_norm.weight",
    "hc_head_fn": "output_hc_fn.weight",
    "hc_head_base": "output_hc_base.weight",
    "hc_head_scale": "output_hc_scale.weight",
}

# Per-block suffixes, hub -> GGUF (shared by main layers and the MTP block).
_BLOCK = {
    "attn_norm.weight": "attn_norm.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "attn.wq_a.weight": "attn_q_a.weight",
    "attn.q_norm.weight": "attn_q_a_norm.weight",
    "attn.wq_b.weight": "attn_q_b.weight",
    "attn.wkv.weight": "attn_kv.weight",
    "attn.kv_norm.weight": "attn_kv_a_norm.weight",
    "attn.wo_a.weight": "attn_output_a.weight",
    "attn.wo_b.weight": "attn_output_b.weight",
    "attn.attn_sink": "attn_sinks.weight",
    "attn.compressor.ape": "attn_compressor_ape.weight",
    "attn.compressor.wkv.weight": "attn_compressor_kv.weight",
    "attn.compressor.wgate.weight": "attn_compressor_gate.weight",
    "attn.compressor.norm.weight": "attn_compressor_norm.weight",
    "attn.indexer.wq_b.weight": "indexer.attn_q_b.weight",
    "attn.indexer.weights_proj.weight": "indexer.proj.weight",
    "attn.indexer.compressor.ape": "indexer_compressor_ape.weight",
    "attn.indexer.compressor.wkv.weight": "indexer_compressor_kv.weight",
    "attn.indexer.compressor.wgate.weight": "indexer_compressor_gate.weight",
    "attn.indexer.compressor.norm.weight": "indexer_compressor_norm.weight",
    "ffn.gate.weight": "ffn_gate_inp.weight",
    "ffn.gate.bias": "exp_probs_b.bias",
    "ffn.gate.tid2eid": "ffn_gate_tid2eid.weight",
    "ffn.shared_experts.w1.weight": "ffn_gate_shexp.weight",
    "ffn.shared_experts.w3.weight": "ffn_up_shexp.weight",
    "ffn.shared_experts.w2.weight": "ffn_down_shexp.weight",
    **{f"hc_{site}_{part}": f"hc_{site}_{part}.weight"
       for site in ("attn", "ffn") for part in ("fn", "base", "scale")},
}  # fmt: skip
# Only in the MTP block (assumed to follow the release's `mtp.N.` spelling).
_MTP_ONLY = {
    "e_proj.weight": "e_proj.weight",
    "h_proj.weight": "h_proj.weight",
    "enorm.weight": "enorm.weight",
    "hnorm.weight": "hnorm.weight",
    "norm.weight": "norm.weight",
    "hc_head_fn": "hc_head_fn.weight",
    "hc_head_base": "hc_head_base.weight",
    "hc_head_scale": "hc_head_scale.weight",
}
EXPERT_WEIGHTS = {"w1": "ffn_gate_exps.weight", "w3": "ffn_up_exps.weight",
                  "w2": "ffn_down_exps.weight"}  # fmt: skip

_BLOCK_NAME = re.compile(r"^(layers|mtp)\.(\d+)\.(.+)$")
_EXPERT = re.compile(r"^ffn\.experts\.(\d+)\.(w[123])\.weight$")
IGNORED_SUFFIXES = (".scale",)  # FP8/FP4 block scales travel with their weight


def hub_name(name: str) -> str:
    """The release's spelling of a checkpoint tensor name (hub or save_pretrained input)."""
    if name in _HF_TOP_LEVEL:
        return _HF_TOP_LEVEL[name]
    if name.startswith("model.layers."):
        name = name[len("model.") :]
        match = _BLOCK_NAME.match(name)
        if match and match.group(3) in _HF_LAYER_QUIRKS:
            return f"layers.{match.group(2)}.{_HF_LAYER_QUIRKS[match.group(3)]}"
    return name


@dataclass(frozen=True)
class GGUFTarget:
    """Where a hub tensor goes: a GGUF tensor, and the expert slot for routed experts."""

    gguf_name: str
    expert: int | None = None
    is_mtp: bool = False


def gguf_target(hub: str) -> GGUFTarget | None:
    """Map a hub name to its GGUF tensor; None for names that are not weights we convert."""
    if hub in _TOP_LEVEL:
        return GGUFTarget(_TOP_LEVEL[hub])
    match = _BLOCK_NAME.match(hub)
    if match is None:
        return None
    kind, index, suffix = match.groups()
    prefix = f"blk.{index}." if kind == "layers" else f"mtp.{index}."
    mtp = kind == "mtp"
    expert = _EXPERT.match(suffix)
    if expert is not None:
        return GGUFTarget(prefix + EXPERT_WEIGHTS[expert.group(2)], int(expert.group(1)), mtp)
    table = {**_BLOCK, **_MTP_ONLY} if mtp else _BLOCK
    if suffix in table:
        return GGUFTarget(prefix + table[suffix], None, mtp)
    return None


def scale_name(weight_name: str) -> str:
    """The sibling holding an FP8/FP4 weight's block scales (`X.weight` -> `X.scale`)."""
    return weight_name.removesuffix(".weight") + ".scale"
