"""Named tiny layer schedules for the HF oracle models.

Each schedule is small enough to run a few hundred tokens in well under a second on one
core, yet exercises every code path of DeepSeek V4 within those tokens: the raw sliding
window wraps, compressed rows are emitted, the lightning indexer has more rows than its
top-k, and the first layers route by token id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The real tokenizer's vocabulary (128000 BPE tokens + added tokens up to id 129279).
VOCAB_SIZE = 129280

_RATIO_TO_LAYER_TYPE = {
    0: "sliding_attention",
    4: "compressed_sparse_attention",
}


@dataclass(frozen=True)
class TinySchedule:
    """Shape and layer schedule of one tiny model (HF config field names where they exist)."""

    name: str
    compress_ratios: tuple[int, ...]  # per layer: 0, 4 (CSA, with indexer) or the HCA ratio
    hca_ratio: int  # HF has one rate per layer type, so all HCA layers share it
    num_hash_layers: int
    sliding_window: int
    index_topk: int
    seq_lengths: tuple[int, ...]  # token sequences the reference logits are recorded for
    seed: int  # known to beat the top-k margin (tools.oracle.margins) on these sequences
    hidden_size: int = 64
    num_attention_heads: int = 4
    head_dim: int = 128
    rope_head_dim: int = 64
    q_lora_rank: int = 64
    o_groups: int = 2
    o_lora_rank: int = 32
    index_n_heads: int = 16
    index_head_dim: int = 128
    n_routed_experts: int = 8
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 32
    swiglu_limit: float = 10.0
    yarn: dict[str, float] = field(
        default_factory=lambda: {
            "factor": 16.0,
            "original_max_position_embeddings": 64,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
        }
    )

    @property
    def num_layers(self) -> int:
        return len(self.compress_ratios)

    def layer_types(self) -> list[str]:
        kinds = dict(_RATIO_TO_LAYER_TYPE)
        kinds[self.hca_ratio] = "heavily_compressed_attention"
        return [kinds[r] for r in self.compress_ratios]

    def hf_config_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``transformers.DeepseekV4Config``."""
        n = self.num_layers
        return {
            "vocab_size": VOCAB_SIZE,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": n,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": 1,
            "head_dim": self.head_dim,
            "partial_rotary_factor": self.rope_head_dim / self.head_dim,
            "q_lora_rank": self.q_lora_rank,
            "o_groups": self.o_groups,
            "o_lora_rank": self.o_lora_rank,
            "index_n_heads": self.index_n_heads,
            "index_head_dim": self.index_head_dim,
            "index_topk": self.index_topk,
            "sliding_window": self.sliding_window,
            "n_routed_experts": self.n_routed_experts,
            "num_experts_per_tok": self.num_experts_per_tok,
            "moe_intermediate_size": self.moe_intermediate_size,
            "swiglu_limit": self.swiglu_limit,
            "layer_types": self.layer_types(),
            "mlp_layer_types": ["hash_moe"] * self.num_hash_layers
            + ["moe"] * (n - self.num_hash_layers),
            "compress_rates": {
                "compressed_sparse_attention": 4,
                "heavily_compressed_attention": self.hca_ratio,
            },
            "rope_parameters": {"rope_type": "yarn", **self.yarn},
            # YaRN-consistent: factor x original context (HF warns otherwise).
            "max_position_embeddings": int(
                self.yarn["factor"] * self.yarn["original_max_position_embeddings"]
            ),
            "bos_token_id": 0,
            "eos_token_id": 1,
            "use_cache": False,
        }


SCHEDULES: dict[str, TinySchedule] = {
    s.name: s
    for s in (
        # Flash-like order: two dense layers, then CSA / HCA alternating; layer 2 is a
        # hash-routed CSA layer as in Flash. HCA ratio 16 so rows appear early.
        TinySchedule(
            name="mixed",
            compress_ratios=(0, 0, 4, 16, 4),
            hca_ratio=16,
            num_hash_layers=3,
            sliding_window=16,
            index_topk=8,
            seq_lengths=(1, 9, 64, 300),
            seed=5,
        ),
        # The real HCA ratio 128 (two rows within 300 tokens) and a wider window.
        TinySchedule(
            name="hca128",
            compress_ratios=(0, 4, 128, 4),
            hca_ratio=128,
            num_hash_layers=1,
            sliding_window=32,
            index_topk=16,
            seq_lengths=(1, 130, 300),
            seed=2,
        ),
        # Pro-like start (compressed layers first), no hash layers, tiny window and top-k.
        TinySchedule(
            name="compressed_first",
            compress_ratios=(8, 4, 0),
            hca_ratio=8,
            num_hash_layers=0,
            sliding_window=8,
            index_topk=4,
            seq_lengths=(2, 40, 200),
            seed=12,
        ),
    )
}
