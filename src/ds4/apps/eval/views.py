"""The full-screen view's model: the run thread writes it (it is the run's RunView),
the screen reads a snapshot of it under one lock."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from ds4.apps.cli_generate import EventPrinter, PrefillMeter
from ds4.domain.eval.report import CaseResult, CaseState
from ds4.domain.eval.runner import Interruption
from ds4.domain.generation.events import PrefillProgress, ReasoningDelta, TextDelta
from ds4.ports.system import Timer

MAX_STREAM_CHARS = 64_000  # the screen shows the tail; older text is dropped
MIN_COLUMNS, MIN_ROWS = 90, 18  # a smaller terminal gets the plain output


@dataclass
class Snapshot:
    rows: list[
        tuple[int, str, str, str, str, str]
    ]  # number, short state, source, title, given, correct
    states: list[CaseState]
    selected: int
    running: int | None
    passed: int
    failed: int
    elapsed: float
    paused: bool
    phase: str  # FILL, THINK, ANS or ""
    progress: tuple[int, int]  # FILL: done/total; THINK/ANS: generated/limit
    speed: float
    current_id: str
    question: str
    stream: list[tuple[str, str]] = field(default_factory=list)  # (style, text)


class TuiState:
    """RunView for the full-screen view."""

    def __init__(
        self,
        results: Sequence[CaseResult],
        controls: RunControls,
        *,
        pause_ms: int,
        hard_limit: int,
        invalidate: Callable[[], None] = lambda: None,
    ) -> None:
        self._results = results
        self._controls = controls
        self._pause = pause_ms / 1000.0
        self._hard = hard_limit
        self.invalidate = invalidate
        self._lock = threading.Lock()
        self._start = controls.timer.elapsed()
        self.selected = 0
        self._running: int | None = None
        self._phase = ""
        self._progress = (0, 0)
        self._limit = 0
        self._stream: list[tuple[str, str]] = []
        self._stream_chars = 0
        self._first_token_at: float | None = None
        self._speed = 0.0

    # ---- RunView (the run thread) --------------------------------------------------

    def case_started(self, result: CaseResult) -> None:
        with self._lock:
            self._running = result.number - 1
            self._phase, self._progress = "FILL", (0, 0)
            self._limit = result.limit
            self._stream, self._stream_chars = [], 0
            self._first_token_at, self._speed = None, 0.0
        self.invalidate()

    def prefill(self, done: int, total: int) -> None:
        with self._lock:
            self._phase, self._progress = "FILL", (done, total)
        self.invalidate()

    def _append(self, style: str, text: str, phase: str) -> None:
        with self._lock:
            self._phase = phase
            if self._stream and self._stream[-1][0] == style:
                self._stream[-1] = (style, self._stream[-1][1] + text)
            else:
                self._stream.append((style, text))
            self._stream_chars += len(text)
            while self._stream_chars > MAX_STREAM_CHARS and len(self._stream) > 1:
                self._stream_chars -= len(self._stream.pop(0)[1])
        self.invalidate()

    def reasoning(self, text: str) -> None:
        self._append("class:thinking", text, "THINK")

    def text(self, text: str) -> None:
        self._append("class:answer", text, "ANS")

    def tokens(self, generated: int) -> None:
        now = time.monotonic()
        with self._lock:
            if self._first_token_at is None:
                self._first_token_at = now
            elif now > self._first_token_at:
                self._speed = (generated - 1) / (now - self._first_token_at)
            if self._phase == "FILL":
                self._phase = "THINK"
            self._progress = (generated, self._limit)
        self.invalidate()

    def case_finished(self, result: CaseResult) -> None:
        with self._lock:
            self._running = None
            self._phase = ""
        self.invalidate()
        if self._pause > 0 and not self._controls.quitting:
            time.sleep(self._pause)  # let the result be seen (--pause-ms)

    # ---- the screen ----------------------------------------------------------------

    @property
    def running(self) -> int | None:
        return self._running

    def move(self, delta: int) -> None:
        with self._lock:
            self.selected = min(max(self.selected + delta, 0), len(self._results) - 1)
        self.invalidate()

    def snapshot(self) -> Snapshot:
        with self._lock:
            rows, states = [], []
            for r in self._results:
                given = r.picked if r.state.graded else ""
                correct = r.case.answer if r.state.graded else ""
                rows.append(
                    (r.number, r.state.short, r.case.source, r.case.display_title, given, correct)
                )
                states.append(r.state)
            current = self._results[self._running] if self._running is not None else None
            show = current or self._results[self.selected]
            progress = self._progress
            if self._phase == "THINK":
                progress = (progress[0], max(self._limit - self._hard, 0))
            return Snapshot(
                rows=rows,
                states=states,
                selected=self.selected,
                running=self._running,
                passed=sum(s is CaseState.PASSED for s in states),
                failed=sum(s is CaseState.FAILED for s in states),
                elapsed=self._controls.timer.elapsed() - self._start,
                paused=self._controls.paused,
                phase=self._phase,
                progress=progress,
                speed=self._speed,
                current_id=f"{show.case.source}/{show.case.id[:12]}",
                question=show.case.question,
                stream=list(self._stream),  # the last case's stays until the next starts
            )


# ---- run control ---------------------------------------------------------------------
# What the user does to a running eval, shared by the key handlers (or the SIGINT
# handler) and the run thread: pause, quit, run another case next; and a timer whose
# clock stops while the run is paused.


class PausableTimer:
    """Timer whose elapsed() leaves out the paused stretches."""

    def __init__(self, base: Timer) -> None:
        self._base = base
        self._paused_total = 0.0
        self._paused_at: float | None = None
        self._lock = threading.Lock()

    def unix(self) -> int:
        return self._base.unix()

    def elapsed(self) -> float:
        with self._lock:
            now = self._base.elapsed()
            held = now - self._paused_at if self._paused_at is not None else 0.0
            return now - self._paused_total - held

    def pause(self) -> None:
        with self._lock:
            if self._paused_at is None:
                self._paused_at = self._base.elapsed()

    def resume(self) -> None:
        with self._lock:
            if self._paused_at is not None:
                self._paused_total += self._base.elapsed() - self._paused_at
                self._paused_at = None


class RunControls:
    """The runner's RunControl: interruption() blocks while paused."""

    def __init__(self, timer: PausableTimer) -> None:
        self.timer = timer
        self._lock = threading.Lock()
        self._running = threading.Event()
        self._running.set()
        self._quit = False
        self.signalled = False  # the quit came from Ctrl+C or a signal
        self._switch = False
        self._choice: int | None = None

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    @property
    def quitting(self) -> bool:
        return self._quit

    def toggle_pause(self) -> None:
        if self._running.is_set():
            self.timer.pause()
            self._running.clear()
        else:
            self.timer.resume()
            self._running.set()

    def quit(self, *, signalled: bool = False) -> None:
        with self._lock:
            self._quit = True
            self.signalled = self.signalled or signalled
        self.timer.resume()
        self._running.set()

    def run_next(self, number: int, *, running: int | None) -> None:
        """Run case `number` next; a different case running now is put back."""
        with self._lock:
            self._choice = number
            self._switch = running is not None and running != number

    def interruption(self) -> Interruption | None:
        while not self._running.wait(0.1):
            pass
        with self._lock:
            if self._quit:
                return Interruption.QUIT
            if self._switch:
                self._switch = False
                return Interruption.SWITCH
        return None

    def take_choice(self) -> int | None:
        with self._lock:
            choice, self._choice = self._choice, None
            return choice


# ---- plain view ----------------------------------------------------------------------
# `ds4 eval --plain` (and whenever stdout is not a big enough terminal): each case's
# header, its streamed output (reasoning dimmed on a terminal), its result line.


def result_line(r: CaseResult) -> str:
    """`PASSED|FAIL got <x> expected <y> (<s.s>s, <n> tokens)`, or the other outcomes."""
    if r.state.graded:
        verdict = "PASSED" if r.state is CaseState.PASSED else "FAIL"
        return (
            f"{verdict} got {r.picked} expected {r.case.answer} "
            f"({r.elapsed:.1f}s, {r.generated_tokens} tokens)"
        )
    if r.state is CaseState.PENDING:
        return f"SWITCHED after {r.generated_tokens} tokens"
    note = f" ({r.note})" if r.note else ""
    return f"{r.state.value}{note} ({r.elapsed:.1f}s, {r.generated_tokens} tokens)"


class PlainView:
    def __init__(self, total: int, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> None:
        self._total = total
        self._out = out
        self._err = err
        self._printer = EventPrinter(out)
        self._meter = PrefillMeter(err)

    def case_started(self, result: CaseResult) -> None:
        c = result.case
        again = f" (retry, limit {result.limit} tokens)" if result.attempts > 1 else ""
        self._out.write(
            f"[{result.number}/{self._total}] {c.source}/{c.id}: {c.display_title}{again}\n"
        )
        self._out.flush()
        self._printer = EventPrinter(self._out)

    def prefill(self, done: int, total: int) -> None:
        self._meter.update(PrefillProgress(done, total))

    def reasoning(self, text: str) -> None:
        self._meter.close()
        self._printer.show(ReasoningDelta(text))

    def text(self, text: str) -> None:
        self._meter.close()
        self._printer.show(TextDelta(text))

    def tokens(self, generated: int) -> None:
        return None

    def case_finished(self, result: CaseResult) -> None:
        self._meter.close()
        self._printer.end()
        self._out.write(result_line(result) + "\n")
        self._out.flush()
