"""Tiny DeepSeek V4 shapes for tests and demos: every layer kind, real vocabulary.

Small window and top-k so that the sliding window wraps, compressed rows are
emitted and the indexer selects among more rows than its top-k within a few
hundred tokens. Rows are multiples of 256 so every quant preset applies.
"""

from __future__ import annotations

import dataclasses

from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.model.presets import FLASH

# Layer kinds: 0-1 dense (hash routed), 2 ratio 4 + indexer (hash routed, as Flash's
# layer 2), 3 ratio 128, 4 ratio 4 + indexer (top-k routed), 5 ratio 128.
_TINY = dataclasses.replace(
    FLASH,
    n_layer=6,
    n_embd=256,
    n_head=4,
    head_dim=128,
    value_dim=128,
    n_rot=64,
    q_lora_rank=64,
    o_lora_rank=64,
    n_out_group=2,
    n_expert=8,
    n_expert_used=2,
    n_ff_exp=256,
    n_hash_layer=3,
    n_swa=16,
    n_indexer_head=4,
    indexer_head_dim=128,
    indexer_top_k=8,
    rope_orig_ctx=64,
    compress_ratios=(0, 0, 4, 128, 4, 128),
    swiglu_clamp=(10.0,) * 6,
)

TINY_SHAPES: dict[str, DeepSeekV4HParams] = {
    "tiny": _TINY,
    # Two layers only (one dense, one ratio-4): the fastest model that still has a
    # compressor and an indexer.
    "tiny-2layer": dataclasses.replace(
        _TINY, n_layer=2, n_hash_layer=1, compress_ratios=(0, 4), swiglu_clamp=(10.0, 10.0)
    ),
}
DEFAULT_TINY_SHAPE = "tiny"
