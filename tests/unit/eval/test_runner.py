"""The eval run loop (docs/reference/eval.md §3) on fakes: grading, skips, retries,
switching, quitting, errors, the trace and the exit code."""

from __future__ import annotations

from tests.unit.eval.fakes import FakeAnswerer, FakeControl, FakeTimer, RecordingView, Reply

from ds4.domain.eval.cases import AnswerKind, EvalCase
from ds4.domain.eval.report import CaseState
from ds4.domain.eval.runner import (
    SKIP_NO_FIT,
    SKIP_NO_ROOM,
    EvalRun,
    Interruption,
    RunSettings,
    generation_limit,
)
from ds4.domain.eval.traces import TraceHeader, parse_trace

CASES = [
    EvalCase("S", "a", "one?", "1", AnswerKind.INTEGER),
    EvalCase("S", "b", "pick", "B", AnswerKind.MULTIPLE_CHOICE, choices=("x", "y")),
    EvalCase("S", "c", "two?", "2", AnswerKind.INTEGER, max_tokens=50),
]
HEADER = TraceHeader(1, "m", "fake", 1000, 200, 100, 3, 0.0, 1.0, 0.05, 1, "high", 20, 10, 3)


def make(
    replies: list[Reply], settings: RunSettings | None = None, **answerer: object
) -> tuple[EvalRun, FakeAnswerer, FakeControl, RecordingView, list[str]]:
    fake = FakeAnswerer(replies, **answerer)  # type: ignore[arg-type]
    control, view = FakeControl(), RecordingView()
    trace: list[str] = []
    run = EvalRun(
        CASES, fake, settings or RunSettings(tokens=200), view=view, control=control,
        timer=FakeTimer(), trace=trace.append,
    )  # fmt: skip
    return run, fake, control, view, trace


def test_generation_limit() -> None:
    assert generation_limit(100, 1000, 200) == 200
    assert generation_limit(900, 1000, 200) == 100
    assert generation_limit(1000, 1000, 200) == SKIP_NO_FIT
    assert generation_limit(None, None, 200) == 200
    assert generation_limit(5, 5, 1) == SKIP_NO_FIT
    assert generation_limit(0, 0, 1) == SKIP_NO_FIT
    assert SKIP_NO_ROOM == "prompt leaves no generation room"


def test_a_run_grades_each_case_and_traces_it() -> None:
    run, fake, _, view, trace = make(
        [Reply("</think>Answer: 1"), Reply("</think>Answer: A"), Reply("</think>Answer: 2")]
    )
    outcome = run.run(HEADER)
    assert [r.state for r in outcome.results] == [
        CaseState.PASSED, CaseState.FAILED, CaseState.PASSED
    ]  # fmt: skip
    assert [r.picked for r in outcome.results] == ["1", "A", "2"]
    assert outcome.exit_code == 1  # a failure
    assert [limit for _, limit in fake.asked] == [200, 200, 50]  # case c's own budget
    assert view.events[:2] == ["start 1 PREFILL", "end 1 PASSED"]
    parsed = parse_trace("".join(trace).encode())
    assert parsed.header["backend"] == "fake"
    assert [c.fields["status"] for c in parsed.cases] == ["PASSED", "FAILED", "PASSED"]
    assert "".join(trace).endswith("===== SUMMARY =====\npassed: 2\nfailed: 1\ntotal: 3\n")


def test_tokens_flag_overrides_case_budgets() -> None:
    run, fake, *_ = make([Reply("Answer: 1")] * 3, RunSettings(tokens=80, tokens_override=True))
    run.run()
    assert [limit for _, limit in fake.asked] == [80, 80, 80]


def test_a_prompt_that_does_not_fit_is_skipped() -> None:
    long_b = lambda p: 1000 if "pick" in p.user else 100  # noqa: E731
    run, fake, _, _, trace = make([Reply("Answer: 1"), Reply("Answer: 2")], prompt_length=long_b)
    outcome = run.run(HEADER)
    assert outcome.results[1].state is CaseState.SKIPPED
    assert outcome.results[1].note == SKIP_NO_FIT
    assert len(fake.asked) == 2  # the skipped case was never asked
    assert outcome.exit_code == 0
    skipped = parse_trace("".join(trace).encode()).cases[1]
    assert (skipped.fields["status"], skipped.fields["error"]) == ("SKIPPED", SKIP_NO_FIT)


def test_near_the_end_of_the_context_the_limit_shrinks() -> None:
    run, fake, *_ = make([Reply("Answer: 1")] * 3, ctx=150)
    run.run()
    assert [limit for _, limit in fake.asked] == [50, 50, 50]


def test_retry_incomplete_doubles_the_budget_once() -> None:
    settings = RunSettings(tokens=200, retry_incomplete=True)
    replies = [
        Reply("thinking...", finish="length", tokens=200),
        Reply("</think>Answer: 1"),
        Reply("</think>Answer: B", finish="length"),  # has its answer line: no retry
        Reply("still", finish="length", tokens=50),
        Reply("still more", finish="length", tokens=100),
    ]
    run, fake, *_ = make(replies, settings, ctx=10_000)
    outcome = run.run()
    assert [limit for _, limit in fake.asked] == [200, 400, 200, 50, 100]
    assert [r.attempts for r in outcome.results] == [2, 1, 2]
    assert outcome.results[0].state is CaseState.PASSED
    assert outcome.results[2].state is CaseState.FAILED


def test_no_retry_without_the_flag_or_room() -> None:
    replies = [Reply("x", finish="length")] * 4
    run, fake, *_ = make(replies, RunSettings(tokens=200, retry_incomplete=True), ctx=300)
    run.run()
    # a and b: twice 200 does not fit the 200 tokens left; c: its 50 doubles to 100
    assert [limit for _, limit in fake.asked] == [200, 200, 50, 100]
    run, fake, *_ = make([Reply("x", finish="length")] * 3, RunSettings(tokens=200))
    run.run()
    assert len(fake.asked) == 3  # no --retry-incomplete


def test_switching_puts_the_case_back_and_runs_the_chosen_one() -> None:
    control_ref: list[FakeControl] = []

    def press_enter_on_3() -> None:
        control_ref[0].choice = 3
        control_ref[0].pending.append(Interruption.SWITCH)

    replies = [
        Reply("</think>Answer: 1", during=press_enter_on_3),
        Reply("</think>Answer: 2"),
        Reply("</think>Answer: 1"),
        Reply("</think>Answer: B"),
    ]
    run, fake, control, _, trace = make(replies)
    control_ref.append(control)
    outcome = run.run(HEADER)
    asked = [user.split("\n")[0] for user, _ in fake.asked]
    assert asked == ["one?", "two?", "one?", "pick"]  # c ran next, then wrapped to a
    assert all(r.state is not CaseState.PENDING for r in outcome.results)
    statuses = [c.fields["status"] for c in parse_trace("".join(trace).encode()).cases]
    assert statuses == ["SWITCHED", "PASSED", "PASSED", "PASSED"]


def test_quitting_stops_the_running_case_and_the_run() -> None:
    control_ref: list[FakeControl] = []

    def press_q() -> None:
        control_ref[0].quit = True

    run, _, control, _, trace = make([Reply("Answer: 1"), Reply("x", during=press_q)])
    control_ref.append(control)
    outcome = run.run(HEADER)
    assert [r.state for r in outcome.results] == [
        CaseState.PASSED, CaseState.STOPPED, CaseState.PENDING
    ]  # fmt: skip
    assert outcome.quit and outcome.exit_code == 0
    assert [c.fields["status"] for c in parse_trace("".join(trace).encode()).cases] == [
        "PASSED", "STOPPED"
    ]  # fmt: skip


def test_an_engine_error_ends_the_run() -> None:
    run, fake, *_ = make([Reply("", finish="error", error="boom"), Reply("Answer: B")])
    outcome = run.run()
    assert outcome.results[0].state is CaseState.ERROR
    assert outcome.results[0].note == "boom"
    assert len(fake.asked) == 1
    assert outcome.errored and outcome.exit_code == 1
