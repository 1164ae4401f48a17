"""`--ssd-streaming auto`'s choice (ds4.domain.memory.choose_streaming): plain mmap when
the model fits the room, else streaming with what the room leaves for the expert cache."""

from __future__ import annotations

from dataclasses import replace

from ds4.domain.memory import GIB, PlanInputs, choose_streaming, memory_plan

PLAIN = PlanInputs(
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
SLOT = 3 << 20  # one expert's three slices
EXPERTS = 43 * 256


def test_a_model_that_fits_is_mapped() -> None:
    choice = choose_streaming(PLAIN, SLOT, EXPERTS)
    assert choice is not None and not choice.stream and choice.budget == 0
    assert choice.line == (
        "ssd-streaming auto: off, plain mmap: the model needs 13.00 GiB of 20.00 GiB "
        "available (cgroup limit)"
    )


def test_a_model_that_does_not_fit_streams_with_the_room_left() -> None:
    tight = replace(PLAIN, room=5 * GIB)
    choice = choose_streaming(tight, SLOT, EXPERTS)
    assert choice is not None and choice.stream
    # 5 - 3 non-routed - 0.5 KV - 0.5 scratch = 1 GiB, in whole slots
    assert choice.budget == (GIB // SLOT) * SLOT
    assert "needs 13.00 GiB but 5.00 GiB available (cgroup limit)" in choice.line
    assert "into a 1023.00 MiB expert cache" in choice.line
    # the plan over that budget fits the room
    plan = memory_plan(replace(tight, expert_budget=choice.budget))
    assert plan.refusal is None


def test_the_budget_never_exceeds_every_expert() -> None:
    # room for much more than the routed bytes, yet the whole model does not fit
    many = replace(PLAIN, room=12 * GIB + GIB // 2, kv_per_session=GIB // 2)
    choice = choose_streaming(many, SLOT, 100)
    assert choice is not None and choice.stream and choice.budget == 100 * SLOT


def test_nothing_is_chosen_when_not_one_expert_fits() -> None:
    assert choose_streaming(replace(PLAIN, room=4 * GIB), SLOT, EXPERTS) is None
    assert choose_streaming(replace(PLAIN, room=5 * GIB, routed=0), SLOT, EXPERTS) is None


def test_the_refusal_names_auto() -> None:
    plan = memory_plan(replace(PLAIN, room=5 * GIB))
    assert plan.refusal is not None and "--ssd-streaming auto" in plan.refusal
