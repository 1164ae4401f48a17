"""`ds4 gguf tiny` output, read back with gguf-py (llama.cpp's own GGUF reader), carries
every key llama.cpp's `deepseek4` loader reads, stored as the type it insists on
(issue 33 item 2; docs/reference/formats.md §2.2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")

T = gguf.GGUFValueType
A = "deepseek4."

# src/llama-model.cpp load_hparams and src/models/deepseek4.cpp load_arch_hparams at
# llama.cpp 0c1e570: get_key refuses a scalar of another type.
SCALARS: dict[str, object] = {
    A + "context_length": T.UINT32,
    A + "embedding_length": T.UINT32,
    A + "block_count": T.UINT32,
    A + "vocab_size": T.UINT32,
    A + "expert_count": T.UINT32,
    A + "expert_used_count": T.UINT32,
    A + "attention.head_count": T.UINT32,
    A + "attention.head_count_kv": T.UINT32,
    A + "attention.key_length": T.UINT32,
    A + "attention.value_length": T.UINT32,
    A + "rope.dimension_count": T.UINT32,
    A + "rope.freq_base": T.FLOAT32,
    A + "rope.scaling.type": T.STRING,
    A + "rope.scaling.factor": T.FLOAT32,
    A + "rope.scaling.original_context_length": T.UINT32,
    A + "rope.scaling.yarn_beta_fast": T.FLOAT32,
    A + "rope.scaling.yarn_beta_slow": T.FLOAT32,
    A + "attention.layer_norm_rms_epsilon": T.FLOAT32,
    A + "attention.q_lora_rank": T.UINT32,
    A + "attention.sliding_window": T.UINT32,
    A + "expert_feed_forward_length": T.UINT32,
    A + "expert_shared_count": T.UINT32,
    A + "expert_weights_scale": T.FLOAT32,
    A + "expert_weights_norm": T.BOOL,
    A + "attention.indexer.head_count": T.UINT32,
    A + "attention.indexer.key_length": T.UINT32,
    A + "attention.indexer.top_k": T.UINT32,
    A + "attention.output_group_count": T.UINT32,
    A + "attention.output_lora_rank": T.UINT32,
    A + "attention.compress_rope_freq_base": T.FLOAT32,
    A + "hyper_connection.count": T.UINT32,
    A + "hyper_connection.sinkhorn_iterations": T.UINT32,
    A + "hyper_connection.epsilon": T.FLOAT32,
    A + "hash_layer_count": T.UINT32,
    A + "expert_gating_func": T.UINT32,
    "general.architecture": T.STRING,
    "tokenizer.ggml.model": T.STRING,
    "tokenizer.ggml.pre": T.STRING,
}
ARRAYS: dict[str, object] = {
    A + "attention.compress_ratios": T.UINT32,
    A + "swiglu_clamp_exp": T.FLOAT32,
    "tokenizer.ggml.tokens": T.STRING,
    "tokenizer.ggml.merges": T.STRING,
    "tokenizer.ggml.token_type": T.INT32,
}


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> object:
    out = tmp_path_factory.mktemp("interop") / "tiny.gguf"
    result = subprocess.run(
        [sys.executable, "-m", "ds4", "gguf", "tiny", "--preset", "tiny-2layer",
         "--out", str(out), "--quiet"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return gguf.GGUFReader(Path(out))


def test_every_scalar_key_has_llama_cpps_type(reader: object) -> None:
    fields = reader.fields  # type: ignore[attr-defined]
    wrong = {k: [t.name for t in fields[k].types] for k in SCALARS if k in fields}
    wrong = {k: v for k, v in wrong.items() if v != [SCALARS[k].name]}  # type: ignore[attr-defined]
    missing = [k for k in SCALARS if k not in fields]
    assert (missing, wrong) == ([], {})


def test_every_array_key_has_llama_cpps_item_type(reader: object) -> None:
    fields = reader.fields  # type: ignore[attr-defined]
    for key, item in ARRAYS.items():
        assert fields[key].types == [T.ARRAY, item], key


def test_values_llama_cpp_checks(reader: object) -> None:
    fields = reader.fields  # type: ignore[attr-defined]
    assert fields[A + "expert_gating_func"].contents() == 4  # SQRT_SOFTPLUS
    assert fields[A + "rope.scaling.type"].contents() == "yarn"
    assert fields["tokenizer.ggml.pre"].contents() == "deepseek-v3"
    assert fields["general.architecture"].contents() == "deepseek4"
    n_tokens = len(fields["tokenizer.ggml.tokens"].contents())
    assert fields[A + "vocab_size"].contents() == n_tokens
    orig = fields[A + "rope.scaling.original_context_length"].contents()
    factor = fields[A + "rope.scaling.factor"].contents()
    assert fields[A + "context_length"].contents() == int(orig * factor)
    n_layer = fields[A + "block_count"].contents()
    assert len(fields[A + "attention.compress_ratios"].contents()) >= n_layer
