"""DeepSeek V4 hyperparameters from a checkpoint's config.json.

Two spellings exist (docs/oracle/hf_deepseek_v4.md §1): the release's (`compress_ratios`
per layer with a trailing MTP entry, `num_hash_layers`, `qk_rope_head_dim`, a flat
`rope_scaling` dict) and what transformers' `save_pretrained` writes (`layer_types` with
`compress_rates`, `mlp_layer_types`, nested `rope_parameters`). Both are accepted; a
missing or ill-typed field is named in the error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams

_LAYER_TYPE_KEYS = {
    "sliding_attention": None,
    "compressed_sparse_attention": "compressed_sparse_attention",
    "heavily_compressed_attention": "heavily_compressed_attention",
}
_DEFAULT_RATES = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


class ConfigError(Ds4Error):
    """config.json lacks a field the converter needs, or holds a bad value."""


class _Fields:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config

    def get(self, key: str, kind: type, default: Any = None) -> Any:
        value = self.config.get(key, default)
        if value is None:
            raise ConfigError(f"config.json: missing {key!r}")
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ConfigError(f"config.json: {key!r} is {value!r}, expected {kind.__name__}")
        return value


def _compress_ratios(f: _Fields, n_layer: int) -> tuple[int, ...]:
    config = f.config
    if "layer_types" in config:
        types = f.get("layer_types", list)
        rates = {**_DEFAULT_RATES, **(config.get("compress_rates") or {})}
        ratios = []
        for i, kind in enumerate(types[:n_layer]):
            if kind not in _LAYER_TYPE_KEYS:
                raise ConfigError(f"config.json: layer_types[{i}] is unknown type {kind!r}")
            key = _LAYER_TYPE_KEYS[kind]
            ratios.append(0 if key is None else int(rates[key]))
    else:
        ratios = [int(r) for r in f.get("compress_ratios", list)[:n_layer]]
    if len(ratios) < n_layer:
        raise ConfigError(f"config.json: layer schedule has {len(ratios)} entries for {n_layer}")
    if any(r < 0 for r in ratios):
        raise ConfigError("config.json: negative compress ratio")
    return tuple(ratios)


def _hash_layers(f: _Fields, n_layer: int) -> int:
    if "mlp_layer_types" not in f.config:
        return int(f.get("num_hash_layers", int, 3))
    kinds = f.get("mlp_layer_types", list)[:n_layer]
    count = sum(1 for k in kinds if k == "hash_moe")
    if any(k == "hash_moe" for k in kinds[count:]):
        raise ConfigError("config.json: hash-routed layers must come first (mlp_layer_types)")
    return count


def _yarn(f: _Fields) -> tuple[Mapping[str, Any], float]:
    """(YaRN parameters of the compressed layers, main rope theta)."""
    params = f.config.get("rope_parameters")
    if isinstance(params, Mapping) and "compress" in params:
        main = params.get("main") or {}
        theta = float(main.get("rope_theta", f.config.get("rope_theta", 10000.0)))
        return params["compress"], theta
    flat = params if isinstance(params, Mapping) else f.config.get("rope_scaling") or {}
    return flat, float(f.get("rope_theta", float, 10000.0))


def hparams_from_config(config: Mapping[str, Any]) -> DeepSeekV4HParams:
    f = _Fields(config)
    n_layer = f.get("num_hidden_layers", int)
    head_dim = f.get("head_dim", int)
    if "qk_rope_head_dim" in config:
        n_rot = f.get("qk_rope_head_dim", int)
    else:
        n_rot = round(head_dim * f.get("partial_rotary_factor", float, 64 / 512))
    yarn, rope_theta = _yarn(f)
    yarn_fields = _Fields(yarn)
    compress_theta = yarn.get("rope_theta", config.get("compress_rope_theta"))
    clamp = f.get("swiglu_limit", float, 10.0)
    return DeepSeekV4HParams(
        n_layer=n_layer,
        n_embd=f.get("hidden_size", int),
        n_vocab=f.get("vocab_size", int),
        n_head=f.get("num_attention_heads", int),
        n_head_kv=f.get("num_key_value_heads", int, 1),
        head_dim=head_dim,
        value_dim=head_dim,
        n_rot=n_rot,
        q_lora_rank=f.get("q_lora_rank", int),
        o_lora_rank=f.get("o_lora_rank", int),
        n_out_group=f.get("o_groups", int),
        n_expert=f.get("n_routed_experts", int),
        n_expert_used=f.get("num_experts_per_tok", int),
        n_ff_exp=f.get("moe_intermediate_size", int),
        n_expert_shared=f.get("n_shared_experts", int, 1),
        n_hash_layer=_hash_layers(f, n_layer),
        n_swa=f.get("sliding_window", int),
        n_indexer_head=f.get("index_n_heads", int),
        indexer_head_dim=f.get("index_head_dim", int),
        indexer_top_k=f.get("index_topk", int),
        n_hc=f.get("hc_mult", int, 4),
        sinkhorn_iters=f.get("hc_sinkhorn_iters", int, 20),
        expert_group_count=int(config.get("n_group") or 0),
        expert_group_used_count=int(config.get("topk_group") or 0),
        rope_orig_ctx=yarn_fields.get("original_max_position_embeddings", int),
        rope_freq_base=rope_theta,
        rope_scaling_factor=yarn_fields.get("factor", float),
        yarn_beta_fast=yarn_fields.get("beta_fast", float, 32.0),
        yarn_beta_slow=yarn_fields.get("beta_slow", float, 1.0),
        compress_rope_freq_base=float(compress_theta if compress_theta is not None else 160000),
        expert_weights_scale=f.get("routed_scaling_factor", float, 1.5),
        rms_eps=f.get("rms_norm_eps", float, 1e-6),
        hc_eps=f.get("hc_eps", float, 1e-6),
        expert_weights_norm=bool(config.get("norm_topk_prob", True)),
        compress_ratios=_compress_ratios(f, n_layer),
        swiglu_clamp=(clamp,) * n_layer,
    )


def mtp_layer_count(config: Mapping[str, Any]) -> int:
    value = config.get("num_nextn_predict_layers", 0)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0
