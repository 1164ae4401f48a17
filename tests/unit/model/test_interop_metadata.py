"""Metadata parity with llama.cpp's `deepseek4` loader (issue 33 item 2): the keys our
writers emit, with their GGUF types, and the files the reader accepts — ours from before
the new keys, ours after, and the shape llama.cpp's converter writes."""

from __future__ import annotations

import pytest

from ds4.domain.gguf.records import MetaValue, ValueType
from ds4.domain.model.hparams import (
    CONTEXT_LENGTH_KEY,
    GATING_KEY,
    KEY_TYPES,
    ROPE_SCALING_TYPE_KEY,
    TOKENS_KEY,
    DeepSeekV4HParams,
    Problem,
    hparams_metadata,
    read_hparams,
)
from ds4.domain.model.presets import FLASH, TINY_SHAPES

INT32 = ValueType.INT32
ORIG_CTX = "deepseek4.rope.scaling.original_context_length"
VOCAB = "deepseek4.vocab_size"
NEW_KEYS = (CONTEXT_LENGTH_KEY, GATING_KEY, ROPE_SCALING_TYPE_KEY)

# What llama.cpp's loader reads, with the storage type its get_key insists on
# (src/llama-model.cpp load_hparams, src/models/deepseek4.cpp load_arch_hparams).
LLAMA_CPP_KEYS: dict[str, ValueType] = {
    "deepseek4.context_length": ValueType.UINT32,
    "deepseek4.embedding_length": ValueType.UINT32,
    "deepseek4.block_count": ValueType.UINT32,
    "deepseek4.expert_count": ValueType.UINT32,
    "deepseek4.expert_used_count": ValueType.UINT32,
    "deepseek4.attention.head_count": ValueType.UINT32,
    "deepseek4.attention.head_count_kv": ValueType.UINT32,
    "deepseek4.attention.key_length": ValueType.UINT32,
    "deepseek4.attention.value_length": ValueType.UINT32,
    "deepseek4.rope.dimension_count": ValueType.UINT32,
    "deepseek4.rope.freq_base": ValueType.FLOAT32,
    "deepseek4.rope.scaling.type": ValueType.STRING,
    "deepseek4.rope.scaling.factor": ValueType.FLOAT32,
    "deepseek4.rope.scaling.original_context_length": ValueType.UINT32,
    "deepseek4.attention.layer_norm_rms_epsilon": ValueType.FLOAT32,
    "deepseek4.attention.q_lora_rank": ValueType.UINT32,
    "deepseek4.attention.sliding_window": ValueType.UINT32,
    "deepseek4.expert_feed_forward_length": ValueType.UINT32,
    "deepseek4.expert_shared_count": ValueType.UINT32,
    "deepseek4.expert_weights_scale": ValueType.FLOAT32,
    "deepseek4.expert_weights_norm": ValueType.BOOL,
    "deepseek4.attention.indexer.head_count": ValueType.UINT32,
    "deepseek4.attention.indexer.key_length": ValueType.UINT32,
    "deepseek4.attention.indexer.top_k": ValueType.UINT32,
    "deepseek4.attention.output_group_count": ValueType.UINT32,
    "deepseek4.attention.output_lora_rank": ValueType.UINT32,
    "deepseek4.attention.compress_rope_freq_base": ValueType.FLOAT32,
    "deepseek4.hyper_connection.count": ValueType.UINT32,
    "deepseek4.hyper_connection.sinkhorn_iterations": ValueType.UINT32,
    "deepseek4.hyper_connection.epsilon": ValueType.FLOAT32,
    "deepseek4.hash_layer_count": ValueType.UINT32,
    "deepseek4.expert_gating_func": ValueType.UINT32,
}


def tokens(n: int) -> MetaValue:
    return MetaValue(ValueType.ARRAY, [f"t{i}" for i in range(n)], ValueType.STRING)


def flash_file() -> dict[str, MetaValue]:
    return {**hparams_metadata(FLASH), TOKENS_KEY: tokens(FLASH.n_vocab)}


def one_problem(meta: dict[str, MetaValue]) -> Problem:
    hp, problems = read_hparams(meta)
    assert hp is None and len(problems) == 1, problems
    assert "\n" not in str(problems[0])
    return problems[0]


# --- the builder ----------------------------------------------------------------------


@pytest.mark.parametrize("hp", [FLASH, *TINY_SHAPES.values()], ids=lambda hp: str(hp.n_layer))
def test_builder_emits_every_key_with_its_type(hp: DeepSeekV4HParams) -> None:
    meta = hparams_metadata(hp)
    for key, vtype in KEY_TYPES.items():
        assert meta[key].vtype is vtype, key
    for key, vtype in LLAMA_CPP_KEYS.items():
        assert meta[key].vtype is vtype, key
    ratios = meta["deepseek4.attention.compress_ratios"]
    assert (ratios.vtype, ratios.item_type) == (ValueType.ARRAY, ValueType.UINT32)
    clamps = meta["deepseek4.swiglu_clamp_exp"]
    assert (clamps.vtype, clamps.item_type) == (ValueType.ARRAY, ValueType.FLOAT32)


def test_builder_values_for_flash() -> None:
    meta = hparams_metadata(FLASH)
    assert meta[CONTEXT_LENGTH_KEY].value == 1048576  # 65536 * 16: config max_position_embeddings
    assert meta[GATING_KEY].value == 4  # LLAMA_EXPERT_GATING_FUNC_TYPE_SQRT_SOFTPLUS
    assert meta[ROPE_SCALING_TYPE_KEY].value == "yarn"
    assert meta[ORIG_CTX] == MetaValue(ValueType.UINT32, 65536)
    assert meta["general.architecture"].value == "deepseek4"


def test_what_the_builder_writes_reads_back() -> None:
    assert read_hparams(flash_file()) == (FLASH, [])


# --- files the reader accepts ---------------------------------------------------------


def test_old_files_without_the_new_keys_still_load() -> None:
    meta = flash_file()
    for key in NEW_KEYS:
        del meta[key]
    meta[ORIG_CTX] = MetaValue(ValueType.UINT64, 65536)  # what we wrote before
    assert read_hparams(meta) == (FLASH, [])


@pytest.mark.parametrize("vtype", [ValueType.UINT32, ValueType.UINT64])
def test_original_context_length_u32_or_u64(vtype: ValueType) -> None:
    meta = flash_file()
    meta[ORIG_CTX] = MetaValue(vtype, 65536)
    hp, problems = read_hparams(meta)
    assert problems == [] and hp is not None and hp.rope_orig_ctx == 65536


def test_context_length_u64_as_the_published_files_store_it() -> None:
    meta = flash_file()
    meta[CONTEXT_LENGTH_KEY] = MetaValue(ValueType.UINT64, 1048576)
    assert read_hparams(meta) == (FLASH, [])


def test_vocab_size_from_the_token_list_when_absent() -> None:
    meta = flash_file()
    del meta[VOCAB]
    assert read_hparams(meta) == (FLASH, [])


def test_llama_cpp_converter_shape_loads() -> None:
    """No vocab_size, i32 compress ratios with the MTP entry, the extra keys it writes."""
    meta = flash_file()
    del meta[VOCAB]
    ratios = [*FLASH.compress_ratios, 0]
    meta["deepseek4.attention.compress_ratios"] = MetaValue(
        ValueType.ARRAY, ratios, ValueType.INT32
    )
    meta["deepseek4.swiglu_clamp_shexp"] = MetaValue(
        ValueType.ARRAY, list(FLASH.swiglu_clamp), ValueType.FLOAT32
    )
    meta["deepseek4.embedding_length_out"] = MetaValue(ValueType.UINT32, 4 * 4096)
    meta["tokenizer.ggml.pre"] = MetaValue(ValueType.STRING, "deepseek-v3")
    assert read_hparams(meta) == (FLASH, [])


# --- one-line refusals ----------------------------------------------------------------


def test_no_vocab_size_and_no_tokens() -> None:
    meta = hparams_metadata(FLASH)
    del meta[VOCAB]
    problem = one_problem(meta)
    assert problem.subject == VOCAB and TOKENS_KEY in problem.message


def test_token_list_of_the_wrong_type() -> None:
    meta = flash_file()
    del meta[VOCAB]
    meta[TOKENS_KEY] = MetaValue(ValueType.ARRAY, [1, 2, 3], ValueType.INT32)
    problem = one_problem(meta)
    assert problem.subject == TOKENS_KEY and "array[int32]" in problem.message


def test_vocab_from_tokens_is_range_checked() -> None:
    meta = flash_file()
    del meta[VOCAB]
    meta[TOKENS_KEY] = tokens(0)
    problem = one_problem(meta)
    assert problem.subject == VOCAB and "out of range" in problem.message


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        (CONTEXT_LENGTH_KEY, MetaValue(ValueType.INT32, 4096), "stored as int32"),
        (CONTEXT_LENGTH_KEY, MetaValue(ValueType.UINT32, 0), "out of range"),
        (CONTEXT_LENGTH_KEY, MetaValue(ValueType.UINT64, 2**32), "out of range"),
        (GATING_KEY, MetaValue(ValueType.UINT32, 2), "2 (sigmoid)"),
        (GATING_KEY, MetaValue(ValueType.UINT32, 99), "99 (unknown)"),
        (GATING_KEY, MetaValue(ValueType.STRING, "sqrtsoftplus"), "stored as string"),
        (ROPE_SCALING_TYPE_KEY, MetaValue(ValueType.STRING, "linear"), "'linear'"),
        (ROPE_SCALING_TYPE_KEY, MetaValue(ValueType.UINT32, 2), "stored as uint32"),
        (ORIG_CTX, MetaValue(ValueType.INT32, 65536), "stored as int32"),
        (VOCAB, MetaValue(ValueType.UINT64, 129280), "stored as uint64"),
    ],
)
def test_bad_types_and_values_are_one_line_naming_the_key(
    key: str, value: MetaValue, words: str
) -> None:
    meta = flash_file()
    meta[key] = value
    problem = one_problem(meta)
    assert problem.subject == key and words in problem.message, problem
