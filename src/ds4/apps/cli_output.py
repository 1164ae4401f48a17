"""What `ds4 cli` shows while it works: streamed text, prefill progress, timings, Ctrl+C."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Never, TextIO

from tqdm import tqdm

from ds4.domain.generation.events import (
    Finished,
    GenerationEvent,
    PrefillProgress,
    ReasoningDelta,
    TextDelta,
)

_DIM, _RESET = "\x1b[90m", "\x1b[0m"


class Interrupt:
    """Ctrl+C as a cancel flag: the first press stops generation at the next token,
    a second press (in one-shot mode) interrupts at once."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self) -> bool:
        return self.requested

    @contextmanager
    def armed(self, *, second_press_exits: bool) -> Iterator[None]:
        self.requested = False

        def on_sigint(signum: int, frame: FrameType | None) -> None:
            if self.requested and second_press_exits:
                raise KeyboardInterrupt
            self.requested = True

        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


class PrefillMeter:
    """A tqdm bar on a terminal, one line per chunk otherwise; silent for one chunk."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self._stream = stream
        self._bar: tqdm[Never] | None = None

    def update(self, event: PrefillProgress) -> None:
        if self._bar is None and event.done == event.total:
            return  # one chunk: nothing worth a bar
        if not self._stream.isatty():
            pct = 100.0 * event.done / max(event.total, 1)
            print(
                f"processing {event.total} input tokens: {event.done}/{event.total} ({pct:.0f}%)",
                file=self._stream,
            )
            return
        bar = self._bar
        if bar is None:
            bar = tqdm(
                total=event.total, desc="prefill", unit="tok", file=self._stream, leave=False
            )
            self._bar = bar
        bar.update(event.done - bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class Stopwatch:
    """Prefill and decode rates for the summary line (docs/reference/cli-and-bench.md §2)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.prefill_end: float | None = None
        self.prefilled = 0

    def prefill_done(self, evaluated: int) -> None:
        if self.prefill_end is None:
            self.prefill_end = time.perf_counter()
            self.prefilled = evaluated

    def summary(self, generated: int) -> str:
        end = time.perf_counter()
        prefill_end = self.prefill_end if self.prefill_end is not None else end
        prefill = self.prefilled / max(prefill_end - self.start, 1e-9)
        decode = generated / max(end - prefill_end, 1e-9)
        return f"ds4: prefill: {prefill:.2f} t/s, generation: {decode:.2f} t/s"


class EventPrinter:
    """Reasoning dimmed on a terminal, a newline where the answer starts."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self._out = out
        self._color = out.isatty()
        self._in_reasoning = False
        self._ended_with_newline = True

    def _write(self, text: str) -> None:
        if text:
            self._out.write(text)
            self._out.flush()
            self._ended_with_newline = text.endswith("\n")

    def show(self, event: GenerationEvent) -> None:
        if isinstance(event, ReasoningDelta):
            if not self._in_reasoning:
                self._in_reasoning = True
                self._write(_DIM if self._color else "")
            self._write(event.text)
        elif isinstance(event, TextDelta):
            self._end_reasoning()
            self._write(event.text)
        elif isinstance(event, Finished):
            self.end()

    def end(self) -> None:
        """The turn is over: reset the colour, end the line."""
        self._end_reasoning()
        if not self._ended_with_newline:
            self._write("\n")

    def _end_reasoning(self) -> None:
        if self._in_reasoning:
            self._in_reasoning = False
            if self._color:
                self._out.write(_RESET)
            self._write("\n" if not self._ended_with_newline else "")
