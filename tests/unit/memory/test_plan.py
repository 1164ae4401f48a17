"""The memory plan's arithmetic (ds4.domain.memory.memory_plan, kv_bytes)."""

from __future__ import annotations

from dataclasses import replace

from ds4.domain.memory import (
    GIB,
    PlanInputs,
    expert_slot_bytes,
    kv_bytes,
    memory_plan,
    routed_expert_bytes,
)
from ds4.domain.model.presets import FLASH

BASE = PlanInputs(
    weights=12 * GIB,
    routed=9 * GIB,
    expert_budget=None,
    kv_per_session=GIB // 4,
    ctx=32768,
    sessions=2,
    repack=0,
    repack_largest=0,
    room=20 * GIB,
    room_source="cgroup limit",
    scratch=GIB // 2,
)


def test_it_fits() -> None:
    plan = memory_plan(BASE)
    assert plan.refusal is None and plan.skip_repack is None
    assert plan.line == (
        "memory plan: weights 12.00 GiB + KV 0.50 GiB (ctx 32768 x 2 sessions) + scratch "
        "0.50 GiB = 13.00 GiB of 20.00 GiB available (cgroup limit)"
    )


def test_refusal_names_ssd_streaming_and_a_budget_that_fits() -> None:
    plan = memory_plan(replace(BASE, room=5 * GIB))
    assert plan.refusal is not None
    # 5 - 3 non-routed - 0.5 KV - 0.5 scratch = 1 GiB left for the expert cache
    assert "needs 13.00 GiB but 5.00 GiB is available (cgroup limit)" in plan.refusal
    assert "--ssd-streaming --ssd-streaming-cache-experts 1.00GB would fit" in plan.refusal


def test_refusal_when_not_even_streaming_fits() -> None:
    plan = memory_plan(replace(BASE, room=3 * GIB))
    assert plan.refusal is not None and "lower --ctx or --sessions" in plan.refusal


def test_streaming_counts_the_non_routed_part_and_the_budget() -> None:
    plan = memory_plan(replace(BASE, expert_budget=GIB, room=5 * GIB))
    assert plan.refusal is None
    assert "weights 4.00 GiB (non-routed + expert cache)" in plan.line
    assert "= 5.00 GiB of 5.00 GiB" in plan.line
    too_big = memory_plan(replace(BASE, expert_budget=4 * GIB, room=5 * GIB))
    assert too_big.refusal is not None
    assert "--ssd-streaming-cache-experts 1.00GB would fit" in too_big.refusal


def test_repack_skipped_when_only_it_does_not_fit() -> None:
    plan = memory_plan(replace(BASE, repack=3 * GIB, repack_largest=GIB, room=13 * GIB + GIB // 2))
    assert plan.refusal is None
    assert plan.skip_repack is not None
    assert plan.skip_repack.startswith("repack-experts: skipped: 3.00 GiB of anonymous memory")
    kept = memory_plan(replace(BASE, repack=3 * GIB, repack_largest=GIB))
    assert kept.skip_repack is None and "repack turns 3.00 GiB" in kept.line


def test_unknown_context() -> None:
    plan = memory_plan(replace(BASE, ctx=0, kv_per_session=0))
    assert "KV 0.00 GiB (ctx chosen later, not counted)" in plan.line


def test_kv_bytes_grows_with_the_context() -> None:
    small, large = kv_bytes(FLASH, 4096), kv_bytes(FLASH, 65536)
    assert 0 < small < large
    # the sliding window is fixed: only the compressed rows grow with the context
    window = sum(min(FLASH.n_swa, 4096) * FLASH.head_dim * 4 for _ in range(FLASH.n_layer))
    assert small > window


def test_expert_sizes_from_the_tensor_directory() -> None:
    sizes = {
        "blk.0.ffn_gate_exps.weight": 8 * 100,
        "blk.0.ffn_up_exps.weight": 8 * 100,
        "blk.0.ffn_down_exps.weight": 8 * 200,
        "blk.0.attn_q.weight": 5000,
    }
    assert routed_expert_bytes(sizes, 1) == 3200
    assert expert_slot_bytes(sizes, 1, 8) == 128 + 128 + 256  # each slice 64-aligned
