"""check_case and record_case on a fake engine and the byte tokenizer: the recorded
prompt encoding, greedy steps continued on the local argmax, the rule per step."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from tests.support.fake_compute import FakeComputeSession, Scripted
from tests.unit.generation.byte_tokenizer import VOCAB, ByteTokenizer
from tests.unit.vectors.vector_fixtures import token

from ds4.domain.chat import ASSISTANT, BOS, UNTHINK, USER
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.vectors.local_run import TokenIndex, check_case, prompt_ids, record_case
from ds4.domain.vectors.records import VectorCase, VectorStep

TOKENIZER = ByteTokenizer()
INDEX = TokenIndex(TOKENIZER)


def case(steps: tuple[VectorStep, ...] = (), prompt: str = "hi", ctx: int = 64) -> VectorCase:
    return VectorCase("c", "short", prompt, ctx, steps, "prompts/c.txt", "official/c.json", None)


def fake(ctx: int = 64, script: object = None) -> tuple[EngineSession, FakeComputeSession]:
    compute = FakeComputeSession(vocab=VOCAB, ctx=ctx, script=script)  # type: ignore[arg-type]
    return EngineSession(compute, chunk=3), compute


def test_the_prompt_is_one_user_turn_with_empty_system_and_thinking_off() -> None:
    expected = TOKENIZER.encode(BOS + USER + "Ciao" + ASSISTANT + UNTHINK)
    assert prompt_ids(TOKENIZER, "Ciao") == expected


def test_a_recording_of_the_engine_checks_against_itself_exactly() -> None:
    session, _ = fake()
    prompt_tokens, steps = record_case(session, TOKENIZER, case(), 5, top_k=20)
    assert prompt_tokens == len(prompt_ids(TOKENIZER, "hi")) and len(steps) == 5
    assert all(len(s.alternatives) == 20 and s.alternatives[0].token == s.token for s in steps)
    again, _ = fake()
    report = check_case(again, TOKENIZER, INDEX, case(steps), top_k=20)
    assert report.passed and report.first_failure is None
    assert report.max_abs_delta == 0.0
    assert [s.recorded_local.rank for s in report.steps if s.recorded_local] == [1] * 5


def test_a_changed_step_fails_there_and_the_run_continues_on_the_local_argmax() -> None:
    session, _ = fake()
    _, steps = record_case(session, TOKENIZER, case(), 5, top_k=20)
    other = next(t for t in "xyzw" if t.encode() != steps[2].token.raw)
    changed = list(steps)
    changed[2] = VectorStep(2, token(other), 0.0, (*steps[2].alternatives,))
    again, compute = fake()
    report = check_case(again, TOKENIZER, INDEX, case(tuple(changed)), top_k=20)
    assert report.first_failure == 2
    assert [s.passed for s in report.steps] == [True, True, False, True, True]
    assert report.steps[2].problems(20, 4.0) == ["argmax differs"]
    # what was evaluated after the prompt is the local argmax of each step but the last
    prompt_len = len(prompt_ids(TOKENIZER, "hi"))
    assert compute.evaluated[prompt_len:] == [s.chosen.id for s in report.steps[:-1]]


def test_a_model_that_disagrees_from_the_first_step_fails_every_step() -> None:
    session, _ = fake()
    _, steps = record_case(session, TOKENIZER, case(), 3, top_k=20)

    def always_q(history: Sequence[int]) -> Scripted:
        return Scripted(ord("q"), margin=40.0)

    again, _ = fake(script=always_q)
    report = check_case(again, TOKENIZER, INDEX, case(steps), top_k=20)
    assert report.first_failure == 0 and not any(s.passed for s in report.steps)
    assert all(s.chosen.raw == b"q" for s in report.steps)
    # the recorded tokens are far down: -40 nats below q
    assert report.max_abs_delta is not None and report.max_abs_delta > 30


def test_a_case_that_does_not_fit_its_session_is_refused() -> None:
    # 6 prompt tokens, then 3 evaluated steps (the 4th step's token is never evaluated)
    session, _ = fake(ctx=9)
    _, steps = record_case(session, TOKENIZER, case(ctx=9), 4, top_k=20)
    assert len(steps) == 4
    session, _ = fake(ctx=8)
    with pytest.raises(Ds4Error, match="6 prompt tokens and 4 steps do not fit a session of 8"):
        record_case(session, TOKENIZER, case(ctx=8), 4, top_k=20)
