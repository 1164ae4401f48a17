"""Named model shapes. Flash's values are the published ones (docs/reference/model.md §1.1–1.2).

PRO is not written here: `--preset pro` reads its release's config.json, shipped as package
data, through the converter's reader (apps/gguf_command.py, docs/model-presets.md).
"""

from __future__ import annotations

import math
from dataclasses import fields

from ds4.domain.model.hparams import FIELD_TO_KEY, DeepSeekV4HParams


def flash_compress_ratios(n_layer: int = 43) -> tuple[int, ...]:
    """Layers 0-1 dense, then even layers ratio 4 and odd layers ratio 128."""
    return tuple(0 if il < 2 else (4 if il % 2 == 0 else 128) for il in range(n_layer))


FLASH = DeepSeekV4HParams(
    n_layer=43,
    n_embd=4096,
    n_vocab=129280,
    n_head=64,
    n_head_kv=1,
    head_dim=512,
    value_dim=512,
    n_rot=64,
    q_lora_rank=1024,
    o_lora_rank=1024,
    n_out_group=8,
    n_expert=256,
    n_expert_used=6,
    n_ff_exp=2048,
    n_expert_shared=1,
    n_hash_layer=3,
    n_swa=128,
    n_indexer_head=64,
    indexer_head_dim=128,
    indexer_top_k=512,
    n_hc=4,
    sinkhorn_iters=20,
    expert_group_count=0,
    expert_group_used_count=0,
    rope_orig_ctx=65536,
    rope_freq_base=10000.0,
    rope_scaling_factor=16.0,
    yarn_beta_fast=32.0,
    yarn_beta_slow=1.0,
    compress_rope_freq_base=160000.0,
    expert_weights_scale=1.5,
    rms_eps=1e-6,
    hc_eps=1e-6,
    expert_weights_norm=True,
    compress_ratios=flash_compress_ratios(),
    swiglu_clamp=(10.0,) * 43,
)

PRESETS: dict[str, DeepSeekV4HParams] = {"flash": FLASH}


def _same(got: object, want: object) -> bool:
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want, rel_tol=0.0, abs_tol=max(1.0, abs(want)) * 1e-6)
    if isinstance(want, tuple) and isinstance(got, tuple):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))
    return got == want


def preset_differences(hp: DeepSeekV4HParams, preset: DeepSeekV4HParams) -> list[str]:
    """Human-readable list of keys where hp differs from a preset (empty if it matches)."""
    out = []
    for f in fields(DeepSeekV4HParams):
        got, want = getattr(hp, f.name), getattr(preset, f.name)
        if not _same(got, want):
            key = FIELD_TO_KEY.get(f.name, f.name)
            if isinstance(want, tuple):
                out.append(f"{key}: differs from the preset's per-layer values")
            else:
                out.append(f"{key}: {got} (preset has {want})")
    return out


def matching_preset(hp: DeepSeekV4HParams) -> str | None:
    for name, preset in PRESETS.items():
        if not preset_differences(hp, preset):
            return name
    return None
