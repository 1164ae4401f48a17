"""The full-screen view's model: the run thread writes it (it is the run's RunView),
the screen reads a snapshot of it under one lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ds4.apps.eval.run_control import RunControls
from ds4.domain.eval.report import CaseResult, CaseState

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
