"""Every deepseek4.* number is range-checked before anything is sized from it (issue 14)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from ds4.domain.gguf.records import MetaValue, ValueType
from ds4.domain.model.hparams import (
    FIELD_TO_KEY,
    FLOAT_BOUNDS,
    INT_BOUNDS,
    Problem,
    hparams_metadata,
    read_hparams,
)
from ds4.domain.model.presets import FLASH, TINY_SHAPES, flash_compress_ratios

U32_MAX = 2**32 - 1

# docs/reference/model.md §1.3's orientation values for PRO (unverified, but real models must pass).
PRO_LIKE = dataclasses.replace(
    FLASH, n_layer=61, n_embd=7168, n_head=128, n_expert=384, n_ff_exp=3072,
    q_lora_rank=1536, n_out_group=16, indexer_top_k=1024,
    compress_ratios=(128, 128, *flash_compress_ratios(61)[2:]), swiglu_clamp=(10.0,) * 61,
)  # fmt: skip


def problems_with(key: str, meta_value: MetaValue) -> tuple[bool, list[Problem]]:
    meta = hparams_metadata(FLASH)
    meta[key] = meta_value
    hp, problems = read_hparams(meta)
    return hp is None, problems


def only_problem_about(key: str, problems: list[Problem]) -> str:
    assert [p.subject for p in problems] == [key], problems
    message = str(problems[0])
    assert "\n" not in message
    return message


SHAPES = {"flash": FLASH, "pro-like": PRO_LIKE, **TINY_SHAPES}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_real_and_test_shapes_are_in_range(name: str) -> None:
    hp = SHAPES[name]
    assert read_hparams(hparams_metadata(hp)) == (hp, [])


@pytest.mark.parametrize("field", sorted(INT_BOUNDS))
def test_integer_just_outside_its_range_is_refused_by_name(field: str) -> None:
    bounds, key = INT_BOUNDS[field], FIELD_TO_KEY[field]
    vtype = ValueType.UINT64 if field == "rope_orig_ctx" else ValueType.UINT32
    for value in (int(bounds.low) - 1, int(bounds.high) + 1):
        if value < 0:
            continue  # a u32 cannot be below 0
        refused, problems = problems_with(key, MetaValue(vtype, value))
        assert refused
        message = only_problem_about(key, problems)
        assert f"{value} is out of range (allowed {int(bounds.low)}..{int(bounds.high)})" in message


@pytest.mark.parametrize("field", sorted(FLOAT_BOUNDS))
@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, math.nan, 1e300])
def test_float_outside_its_range_is_refused_by_name(field: str, value: float) -> None:
    key = FIELD_TO_KEY[field]
    if FLOAT_BOUNDS[field].admits(value):
        pytest.skip("inside this key's range")
    refused, problems = problems_with(key, MetaValue(ValueType.FLOAT64, value))
    assert refused
    assert "is out of range (allowed" in only_problem_about(key, problems)


@pytest.mark.parametrize(
    ("key", "meta_value"),
    [
        # the issue's cases: a hang, OverflowErrors in the native structs, math domain errors
        ("deepseek4.hyper_connection.sinkhorn_iterations", MetaValue(ValueType.UINT32, 2**31 - 1)),
        ("deepseek4.hyper_connection.sinkhorn_iterations", MetaValue(ValueType.UINT32, U32_MAX)),
        ("deepseek4.attention.indexer.top_k", MetaValue(ValueType.UINT32, U32_MAX)),
        ("deepseek4.attention.sliding_window", MetaValue(ValueType.UINT32, U32_MAX)),
        ("deepseek4.rope.scaling.original_context_length", MetaValue(ValueType.UINT64, 0)),
        ("deepseek4.rope.scaling.original_context_length", MetaValue(ValueType.UINT64, 2**64 - 1)),
        ("deepseek4.attention.compress_rope_freq_base", MetaValue(ValueType.FLOAT32, 0.0)),
        ("deepseek4.rope.freq_base", MetaValue(ValueType.FLOAT32, 1.0)),  # log(1) = 0
        ("deepseek4.attention.layer_norm_rms_epsilon", MetaValue(ValueType.FLOAT64, 1e-300)),
        ("deepseek4.expert_weights_scale", MetaValue(ValueType.INT32, -2)),
        ("deepseek4.block_count", MetaValue(ValueType.UINT32, 100_000)),
    ],
)
def test_issue_values_are_refused_with_one_line_naming_the_key(
    key: str, meta_value: MetaValue
) -> None:
    refused, problems = problems_with(key, meta_value)
    assert refused
    assert "out of range" in only_problem_about(key, problems)


@pytest.mark.parametrize("ratio", [3, 2048, 2**31, -4, 1])
def test_compress_ratio_outside_the_allowed_set(ratio: int) -> None:
    key = FIELD_TO_KEY["compress_ratios"]
    ratios = list(flash_compress_ratios())
    ratios[5] = ratio
    vtype = ValueType.INT32 if ratio < 2**31 else ValueType.UINT32
    refused, problems = problems_with(key, MetaValue(ValueType.ARRAY, ratios, vtype))
    assert refused
    message = only_problem_about(key, problems)
    assert f"layer 5 has ratio {ratio} (allowed 0 or a power of two from 2 to 1024)" in message


@pytest.mark.parametrize("clamp", [0.0, -10.0, math.inf, math.nan, 1e9])
def test_swiglu_clamp_outside_its_range(clamp: float) -> None:
    key = FIELD_TO_KEY["swiglu_clamp"]
    clamps = [10.0] * 43
    clamps[7] = clamp
    refused, problems = problems_with(key, MetaValue(ValueType.ARRAY, clamps, ValueType.FLOAT64))
    assert refused
    assert "layer 7 has clamp" in only_problem_about(key, problems)


def test_only_the_first_layers_of_a_long_array_are_read() -> None:
    """Extra entries are ignored, so a huge array costs nothing beyond n_layer items."""
    key = FIELD_TO_KEY["compress_ratios"]
    ratios = [*flash_compress_ratios(), *([3] * 1000)]
    refused, problems = problems_with(key, MetaValue(ValueType.ARRAY, ratios, ValueType.UINT32))
    assert not refused and problems == []


def test_out_of_range_block_count_reads_no_per_layer_array() -> None:
    key = FIELD_TO_KEY["n_layer"]
    refused, problems = problems_with(key, MetaValue(ValueType.UINT32, U32_MAX))
    assert refused
    assert [p.subject for p in problems] == [key]  # not also "needs one entry per layer"
