"""ds4 eval's front ends without a terminal: the plain result lines, the full screen's
drawing functions, the pause-aware timer and the controls."""

from __future__ import annotations

import threading

from ds4.apps.eval.tui import left_pane, left_width, short_count, status_line, stream_tail
from ds4.apps.eval.views import PausableTimer, RunControls, TuiState, result_line
from ds4.domain.eval.cases import AnswerKind, EvalCase
from ds4.domain.eval.report import CaseResult, CaseState
from ds4.domain.eval.runner import Interruption

CASE = EvalCase("AIME", "aime2025-01", "Find the sum.", "70", AnswerKind.INTEGER)


class StepTimer:
    def __init__(self) -> None:
        self.now = 0.0

    def elapsed(self) -> float:
        return self.now

    def unix(self) -> int:
        return 0


def text_of(fragments: list) -> str:  # type: ignore[type-arg]
    return "".join(f[1] for f in fragments)


def test_plain_result_lines() -> None:
    passed = CaseResult(1, CASE, CaseState.PASSED, 10, 438, picked="70", elapsed=12.34)
    assert result_line(passed) == "PASSED got 70 expected 70 (12.3s, 438 tokens)"
    failed = CaseResult(1, CASE, CaseState.FAILED, 10, 2048, picked="?", elapsed=1.0)
    assert result_line(failed) == "FAIL got ? expected 70 (1.0s, 2048 tokens)"
    skipped = CaseResult(1, CASE, CaseState.SKIPPED, note="prompt does not fit context")
    assert result_line(skipped).startswith("SKIPPED (prompt does not fit context)")


def test_layout_numbers() -> None:
    assert left_width(90) == 45 and left_width(60) == 42 and left_width(300) == 72
    assert [short_count(n) for n in (999, 9999, 10_000, 15_500, 1_200_000)] == [
        "999", "9999", "10k", "15k", "1m"
    ]  # fmt: skip


def make_state() -> tuple[TuiState, RunControls, list[CaseResult], StepTimer]:
    base = StepTimer()
    controls = RunControls(PausableTimer(base))
    results = [CaseResult(i + 1, CASE) for i in range(3)]
    return TuiState(results, controls, pause_ms=0, hard_limit=100), controls, results, base


def test_the_screen_follows_a_case() -> None:
    state, _, results, base = make_state()
    results[0].state, results[0].limit = CaseState.PREFILL, 1000
    state.case_started(results[0])
    state.prefill(50, 200)
    assert "FILL 50/200 25%" in text_of(status_line(state.snapshot()))
    state.reasoning("thinking hard")
    state.tokens(1)
    assert "THINK 1/900" in text_of(status_line(state.snapshot()))  # limit - hard limit
    state.text("Answer: 70")
    snap = state.snapshot()
    assert "ANS" in text_of(status_line(snap)) and "AIME/aime2025-01" in text_of(status_line(snap))
    assert stream_tail(snap, 8, 2) == [
        ("class:thinking", " hard"), ("class:answer", "Ans"), ("", "\n"),
        ("class:answer", "wer: 70"),
    ]  # fmt: skip
    results[0].state, results[0].picked = CaseState.PASSED, "70"
    state.case_finished(results[0])
    base.now = 125.0
    left = text_of(left_pane(state.snapshot(), 50, 10))
    assert left.startswith("ds4-eval (p)ause (q)uit 00h:02m")
    assert "score 1/3  failed 0" in left
    assert ">01 PASS AIME: Find the sum." in left and "70/70" in left
    assert " 02 PEND AIME" in left


def test_stream_tail_wraps_and_keeps_the_last_lines() -> None:
    state, *_ = make_state()
    state.reasoning("abcdefghij\nkl")
    assert text_of(stream_tail(state.snapshot(), 4, 3)) == "efgh\nij\nkl"


def test_pause_stops_the_clock_and_blocks_the_run() -> None:
    base = StepTimer()
    timer = PausableTimer(base)
    controls = RunControls(timer)
    base.now = 10.0
    controls.toggle_pause()
    base.now = 50.0
    assert timer.elapsed() == 10.0
    blocked = threading.Event()
    got: list[Interruption | None] = []

    def poll() -> None:
        blocked.set()
        got.append(controls.interruption())

    worker = threading.Thread(target=poll)
    worker.start()
    blocked.wait(5)
    assert worker.is_alive()  # held while paused
    controls.toggle_pause()
    worker.join(5)
    assert got == [None]
    base.now = 60.0
    assert timer.elapsed() == 20.0


def test_switch_is_given_once_and_quit_sticks() -> None:
    controls = RunControls(PausableTimer(StepTimer()))
    controls.run_next(3, running=1)
    assert controls.interruption() is Interruption.SWITCH
    assert controls.interruption() is None
    assert controls.take_choice() == 3 and controls.take_choice() is None
    controls.run_next(2, running=2)  # the case already running: nothing to interrupt
    assert controls.interruption() is None
    controls.quit()
    assert controls.interruption() is Interruption.QUIT
    assert controls.interruption() is Interruption.QUIT
