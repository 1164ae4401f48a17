"""Hyperparameters, the Flash preset and the tensor catalog (docs/reference/model.md §1,
docs/reference/formats.md §2.2, §3)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from tests.support.flash_fixture import flash_tensors

from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.quant_formats import Role
from ds4.domain.gguf.records import MetaValue, ValueType
from ds4.domain.model.catalog import model_tensors, mtp_tensors
from ds4.domain.model.hparams import hparams_metadata, read_hparams
from ds4.domain.model.presets import FLASH, flash_compress_ratios, matching_preset


def test_flash_schedule_is_2_dense_21_csa_20_hca() -> None:
    ratios = flash_compress_ratios()
    assert ratios[:4] == (0, 0, 4, 128)
    assert ratios[42] == 4
    assert (ratios.count(0), ratios.count(4), ratios.count(128)) == (2, 21, 20)


def test_catalog_equals_the_spec_table_for_flash() -> None:
    spec = {name: (tuple(dims), qtype.name) for name, dims, qtype in flash_tensors()}
    ours = {t.name: t for t in model_tensors(FLASH)}
    optional = {n for n, t in ours.items() if t.optional}
    # The spec table lists exp_probs_b.bias only where the official release has it.
    assert set(spec) == set(ours) - (optional - set(spec))
    for name, (dims, type_name) in spec.items():
        assert ours[name].dims == dims, name
        assert GGMLType[type_name] in ours[name].allowed, name


def test_catalog_is_derived_from_hparams_not_flash() -> None:
    tiny = dataclasses.replace(
        FLASH, n_layer=4, n_embd=64, n_head=4, head_dim=32, value_dim=32, n_rot=8,
        q_lora_rank=16, o_lora_rank=8, n_out_group=2, n_expert=4, n_expert_used=2, n_ff_exp=32,
        n_hash_layer=1, n_indexer_head=2, indexer_head_dim=16, indexer_top_k=4, n_vocab=1000,
        compress_ratios=(0, 4, 8, 4), swiglu_clamp=(10.0,) * 4,
    )  # fmt: skip
    names = {t.name: t for t in model_tensors(tiny)}
    assert names["blk.1.attn_compressor_kv.weight"].dims == (64, 64)  # overlapping: 2*Dh
    assert names["blk.2.attn_compressor_ape.weight"].dims == (32, 8)
    assert "blk.2.indexer.proj.weight" not in names
    assert names["blk.3.indexer.attn_q_b.weight"].dims == (16, 32)
    assert names["blk.0.ffn_gate_tid2eid.weight"].dims == (2, 1000)
    assert "blk.1.ffn_gate_tid2eid.weight" not in names
    assert names["blk.0.attn_output_a.weight"].dims == (2 * 32, 2 * 8)


def test_mtp_catalog_has_no_compressor_and_requires_bias() -> None:
    mtp = {t.name: t for t in mtp_tensors(FLASH)}
    assert not any("compressor" in n or "indexer" in n for n in mtp)
    assert not mtp["mtp.0.exp_probs_b.bias"].optional
    assert mtp["mtp.0.e_proj.weight"].dims == (4096, 4096)
    assert mtp["mtp.0.e_proj.weight"].role is Role.PROJECTION


def test_metadata_round_trip_and_preset_match() -> None:
    hp, problems = read_hparams(hparams_metadata(FLASH))
    assert problems == []
    assert hp == FLASH
    assert matching_preset(FLASH) == "flash"
    assert matching_preset(dataclasses.replace(FLASH, n_layer=61)) is None


def test_every_metadata_problem_is_reported_at_once() -> None:
    meta = hparams_metadata(FLASH)
    del meta["deepseek4.block_count"]
    meta["deepseek4.vocab_size"] = MetaValue(ValueType.INT32, 129280)  # wrong storage type
    meta["deepseek4.expert_weights_norm"] = MetaValue(ValueType.UINT8, 1)
    hp, problems = read_hparams(meta)
    assert hp is None
    subjects = {p.subject for p in problems}
    assert {
        "deepseek4.block_count",
        "deepseek4.vocab_size",
        "deepseek4.expert_weights_norm",
    } <= subjects
    assert any("stored as int32, expected uint32" in p.message for p in problems)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"n_head_kv": 2}, "deepseek4.attention.head_count_kv"),
        ({"n_out_group": 7}, "deepseek4.attention.output_group_count"),
        ({"n_expert_used": 300}, "deepseek4.expert_used_count"),
        ({"expert_group_count": 8}, "deepseek4.expert_group_count"),
    ],
)
def test_architecture_rules(change: dict[str, Any], key: str) -> None:
    _, problems = read_hparams(hparams_metadata(dataclasses.replace(FLASH, **change)))
    assert key in {p.subject for p in problems}


def test_negative_and_short_ratio_arrays_are_rejected() -> None:
    meta = hparams_metadata(FLASH)
    meta["deepseek4.attention.compress_ratios"] = MetaValue(
        ValueType.ARRAY, [0, -4] + [4] * 41, ValueType.INT32
    )
    _, problems = read_hparams(meta)
    assert any("ratio -4" in p.message for p in problems)
    meta["deepseek4.attention.compress_ratios"] = MetaValue(
        ValueType.ARRAY, [0] * 10, ValueType.UINT32
    )
    _, problems = read_hparams(meta)
    assert any("has 10 entries" in p.message for p in problems)
