"""The demo model's shape: a small DeepSeek V4 with every layer kind (docs/demo-model.md).

Layer schedule (docs/reference/model.md §1.2): layer 0 dense (ratio 0), layer 1 CSA
(ratio 4, with the lightning indexer), layer 2 HCA (ratio 128), layer 3 CSA again; the
first two layers route by token id (hash layers), the last two by biased top-k. Head
width 128 with 64 RoPE dims and indexer heads 128 wide, so the engine's `ds4` and
`exact` numerics accept it (docs/reference/model.md §4.4). The YaRN values are Flash's.
"""

from __future__ import annotations

from tools.oracle.schedules import TinySchedule

DEMO = TinySchedule(
    name="demo",
    compress_ratios=(0, 4, 128, 4),
    hca_ratio=128,
    num_hash_layers=2,
    sliding_window=128,
    index_topk=16,
    seq_lengths=(),
    seed=0,  # unused here: the training seed is a flag of tools/train_demo.py
    hidden_size=128,
    num_attention_heads=4,
    head_dim=128,
    rope_head_dim=64,
    q_lora_rank=128,
    o_groups=2,
    o_lora_rank=64,
    index_n_heads=16,
    index_head_dim=128,
    n_routed_experts=8,
    num_experts_per_tok=2,
    moe_intermediate_size=128,
    yarn={
        "factor": 16.0,
        "original_max_position_embeddings": 65536,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
    },
)
