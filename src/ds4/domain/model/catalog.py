"""The DeepSeek V4 tensor catalog, derived from the hyperparameters (docs/reference/formats.md §3).

Dims are in GGUF order ([ne0 = inputs, ne1 = outputs, ne2 = experts]). Allowed types
are by role, read from the roles of QUANT_FORMATS (ds4.domain.gguf.quant_formats): the
published ds4 mixture, widened so F32 is accepted wherever a float
is expected (tiny test models) and higher-precision forms of the quantized roles
(f16/q8 conversions) stay loadable.
"""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.gguf.ggml_types import GGMLType as T
from ds4.domain.gguf.quant_formats import Role, allowed_types
from ds4.domain.model.hparams import DeepSeekV4HParams

# What the loader accepts per role: the roles column of QUANT_FORMATS.
ALLOWED_TYPES: dict[Role, frozenset[T]] = {role: allowed_types(role) for role in Role}

# The type each role has in the published ds4 GGUFs (used by converters' defaults).
PUBLISHED_TYPE: dict[Role, T] = {
    Role.VECTOR: T.F32,
    Role.FLOAT: T.F16,
    Role.PROJECTION: T.Q8_0,
    Role.EXPERT: T.IQ2_XXS,
    Role.INDEX: T.I32,
}


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dims: tuple[int, ...]
    role: Role
    layer: int | None = None  # None for top-level tensors
    optional: bool = False

    @property
    def allowed(self) -> frozenset[T]:
        return ALLOWED_TYPES[self.role]


def _top_level(hp: DeepSeekV4HParams) -> list[TensorSpec]:
    d, v, hc = hp.n_embd, hp.n_vocab, hp.hc_dim
    return [
        TensorSpec("token_embd.weight", (d, v), Role.FLOAT),
        TensorSpec("output_hc_fn.weight", (hc, hp.n_hc), Role.FLOAT),
        TensorSpec("output_hc_scale.weight", (1,), Role.VECTOR),
        TensorSpec("output_hc_base.weight", (hp.n_hc,), Role.VECTOR),
        TensorSpec("output_norm.weight", (d,), Role.VECTOR),
        TensorSpec("output.weight", (d, v), Role.PROJECTION),
    ]


def _hc(prefix: str, hp: DeepSeekV4HParams, layer: int | None, fn_role: Role) -> list[TensorSpec]:
    out = []
    for site in ("attn", "ffn"):
        out += [
            TensorSpec(f"{prefix}hc_{site}_fn.weight", (hp.hc_dim, hp.hc_mix), fn_role, layer),
            TensorSpec(f"{prefix}hc_{site}_scale.weight", (3,), Role.VECTOR, layer),
            TensorSpec(f"{prefix}hc_{site}_base.weight", (hp.hc_mix,), Role.VECTOR, layer),
        ]
    return out


def _attention(prefix: str, hp: DeepSeekV4HParams, layer: int | None) -> list[TensorSpec]:
    d, lq, dh = hp.n_embd, hp.q_lora_rank, hp.head_dim
    p = Role.PROJECTION
    return [
        TensorSpec(f"{prefix}attn_norm.weight", (d,), Role.VECTOR, layer),
        TensorSpec(f"{prefix}attn_q_a.weight", (d, lq), p, layer),
        TensorSpec(f"{prefix}attn_q_a_norm.weight", (lq,), Role.VECTOR, layer),
        TensorSpec(f"{prefix}attn_q_b.weight", (lq, hp.q_dim), p, layer),
        TensorSpec(f"{prefix}attn_kv.weight", (d, dh), p, layer),
        TensorSpec(f"{prefix}attn_kv_a_norm.weight", (dh,), Role.VECTOR, layer),
        TensorSpec(f"{prefix}attn_sinks.weight", (hp.n_head,), Role.VECTOR, layer),
        TensorSpec(
            f"{prefix}attn_output_a.weight",
            (hp.group_in_dim, hp.n_out_group * hp.o_lora_rank),
            p,
            layer,
        ),
        TensorSpec(f"{prefix}attn_output_b.weight", (hp.n_out_group * hp.o_lora_rank, d), p, layer),
    ]


def _compressor(hp: DeepSeekV4HParams, layer: int) -> list[TensorSpec]:
    ratio = hp.compress_ratios[layer]
    if ratio == 0:
        return []
    pre, d, f = f"blk.{layer}.", hp.n_embd, Role.FLOAT
    width = hp.compressor_width(layer)
    out = [
        TensorSpec(f"{pre}attn_compressor_ape.weight", (width, ratio), f, layer),
        TensorSpec(f"{pre}attn_compressor_kv.weight", (d, width), f, layer),
        TensorSpec(f"{pre}attn_compressor_gate.weight", (d, width), f, layer),
        TensorSpec(f"{pre}attn_compressor_norm.weight", (hp.head_dim,), Role.VECTOR, layer),
    ]
    if hp.has_indexer(layer):
        iw = 2 * hp.indexer_head_dim  # the indexer compressor overlaps like ratio-4 attention
        out += [
            TensorSpec(
                f"{pre}indexer.attn_q_b.weight",
                (hp.q_lora_rank, hp.n_indexer_head * hp.indexer_head_dim),
                f,
                layer,
            ),
            TensorSpec(f"{pre}indexer.proj.weight", (d, hp.n_indexer_head), f, layer),
            TensorSpec(f"{pre}indexer_compressor_ape.weight", (iw, ratio), f, layer),
            TensorSpec(f"{pre}indexer_compressor_kv.weight", (d, iw), f, layer),
            TensorSpec(f"{pre}indexer_compressor_gate.weight", (d, iw), f, layer),
            TensorSpec(
                f"{pre}indexer_compressor_norm.weight", (hp.indexer_head_dim,), Role.VECTOR, layer
            ),
        ]
    return out


def _ffn(
    prefix: str, hp: DeepSeekV4HParams, layer: int | None, bias_optional: bool, router_role: Role
) -> list[TensorSpec]:
    d, e, f = hp.n_embd, hp.n_expert, hp.n_ff_exp
    fs = f * hp.n_expert_shared
    x, p = Role.EXPERT, Role.PROJECTION
    return [
        TensorSpec(f"{prefix}ffn_norm.weight", (d,), Role.VECTOR, layer),
        TensorSpec(f"{prefix}ffn_gate_inp.weight", (d, e), router_role, layer),
        TensorSpec(f"{prefix}exp_probs_b.bias", (e,), Role.VECTOR, layer, optional=bias_optional),
        TensorSpec(f"{prefix}ffn_gate_exps.weight", (d, f, e), x, layer),
        TensorSpec(f"{prefix}ffn_up_exps.weight", (d, f, e), x, layer),
        TensorSpec(f"{prefix}ffn_down_exps.weight", (f, d, e), x, layer),
        TensorSpec(f"{prefix}ffn_gate_shexp.weight", (d, fs), p, layer),
        TensorSpec(f"{prefix}ffn_up_shexp.weight", (d, fs), p, layer),
        TensorSpec(f"{prefix}ffn_down_shexp.weight", (fs, d), p, layer),
    ]


def layer_tensors(hp: DeepSeekV4HParams, layer: int) -> list[TensorSpec]:
    pre = f"blk.{layer}."
    out = _hc(pre, hp, layer, Role.FLOAT) + _attention(pre, hp, layer) + _compressor(hp, layer)
    out += _ffn(pre, hp, layer, bias_optional=True, router_role=Role.FLOAT)
    if hp.is_hash_layer(layer):
        out.append(
            TensorSpec(
                f"{pre}ffn_gate_tid2eid.weight", (hp.n_expert_used, hp.n_vocab), Role.INDEX, layer
            )
        )
    return out


def model_tensors(hp: DeepSeekV4HParams) -> list[TensorSpec]:
    """Every tensor of the main GGUF, top-level first, then layer by layer."""
    out = _top_level(hp)
    for layer in range(hp.n_layer):
        out += layer_tensors(hp, layer)
    return out


def mtp_tensors(hp: DeepSeekV4HParams) -> list[TensorSpec]:
    """The separate MTP GGUF (docs/reference/formats.md §3.4): one ratio-0, top-k routed block."""
    pre, d = "mtp.0.", hp.n_embd
    out = [
        TensorSpec(f"{pre}hc_head_fn.weight", (hp.hc_dim, hp.n_hc), Role.FLOAT),
        TensorSpec(f"{pre}hc_head_scale.weight", (1,), Role.VECTOR),
        TensorSpec(f"{pre}hc_head_base.weight", (hp.n_hc,), Role.VECTOR),
        TensorSpec(f"{pre}e_proj.weight", (d, d), Role.PROJECTION),
        TensorSpec(f"{pre}h_proj.weight", (d, d), Role.PROJECTION),
        TensorSpec(f"{pre}enorm.weight", (d,), Role.VECTOR),
        TensorSpec(f"{pre}hnorm.weight", (d,), Role.VECTOR),
        TensorSpec(f"{pre}norm.weight", (d,), Role.VECTOR),
    ]
    out += _hc(pre, hp, None, Role.FLOAT) + _attention(pre, hp, None)
    out += _ffn(pre, hp, None, bias_optional=False, router_role=Role.FLOAT)
    return out
