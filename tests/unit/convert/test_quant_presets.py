"""Quant presets: the published mixture for non-expert tensors, experts per preset."""

from __future__ import annotations

import pytest

from ds4.domain.convert.plan import check_plan_fits, quant_plan
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType as T
from ds4.domain.model.catalog import model_tensors
from ds4.domain.model.presets import FLASH, TINY_SHAPES


def types_for(preset: str, q4_last: int | None = None) -> dict[str, T]:
    plan = quant_plan(preset, FLASH, q4_last)
    return {s.name: plan.tensor_type(s, FLASH) for s in model_tensors(FLASH)}


def test_q2_is_the_published_flash_mixture() -> None:
    t = types_for("q2")
    assert t["token_embd.weight"] is T.F16
    assert t["output.weight"] is T.Q8_0
    assert t["blk.0.attn_q_a.weight"] is T.Q8_0
    assert t["blk.0.hc_attn_fn.weight"] is T.F16
    assert t["blk.2.indexer.proj.weight"] is T.F16
    assert t["blk.0.attn_norm.weight"] is T.F32
    assert t["blk.0.ffn_gate_tid2eid.weight"] is T.I32
    assert t["blk.9.ffn_gate_exps.weight"] is T.IQ2_XXS
    assert t["blk.9.ffn_up_exps.weight"] is T.IQ2_XXS
    assert t["blk.9.ffn_down_exps.weight"] is T.Q2_K
    assert t["blk.9.ffn_gate_shexp.weight"] is T.Q8_0


@pytest.mark.parametrize(("preset", "expert"), [("q4", T.Q4_K), ("q8", T.Q8_0), ("f16", T.F16)])
def test_expert_types_per_preset(preset: str, expert: T) -> None:
    t = types_for(preset)
    assert t["blk.5.ffn_down_exps.weight"] is expert
    assert t["blk.5.ffn_norm.weight"] is T.F32


def test_f32_is_f32_everywhere_but_the_index_table() -> None:
    t = types_for("f32")
    assert {v for k, v in t.items() if "tid2eid" not in k} == {T.F32}


def test_q2_q4_upgrades_only_the_last_layers() -> None:
    t = types_for("q2-q4", q4_last=3)
    assert t["blk.39.ffn_gate_exps.weight"] is T.IQ2_XXS
    assert t["blk.40.ffn_gate_exps.weight"] is T.Q4_K
    assert t["blk.42.ffn_down_exps.weight"] is T.Q4_K
    default = types_for("q2-q4")  # a quarter of 43 layers = 10
    assert default["blk.32.ffn_up_exps.weight"] is T.IQ2_XXS
    assert default["blk.33.ffn_up_exps.weight"] is T.Q4_K


def test_bad_preset_and_rows_that_do_not_fit() -> None:
    with pytest.raises(Ds4Error, match="unknown quant preset"):
        quant_plan("q3", FLASH)
    hp = TINY_SHAPES["tiny"]
    narrow = hp.__class__(**{**hp.__dict__, "n_embd": 64})
    plan = quant_plan("q2", narrow)
    with pytest.raises(Ds4Error, match="not a multiple of the IQ2_XXS block"):
        check_plan_fits(plan, model_tensors(narrow), narrow)


def test_mxfp4_keeps_every_routed_expert_mxfp4_and_the_rest_as_published() -> None:
    t, q2 = types_for("mxfp4"), types_for("q2")
    experts = {k for k in t if "_exps." in k}
    assert experts and {t[k] for k in experts} == {T.MXFP4}
    assert {k: v for k, v in t.items() if k not in experts} == {
        k: v for k, v in q2.items() if k not in experts
    }
