"""`ds4 eval --plain` (and whenever stdout is not a big enough terminal): each case's
header, its streamed output (reasoning dimmed on a terminal), its result line."""

from __future__ import annotations

import sys
from typing import TextIO

from ds4.apps.cli_output import EventPrinter, PrefillMeter
from ds4.domain.eval.report import CaseResult, CaseState
from ds4.domain.generation.events import PrefillProgress, ReasoningDelta, TextDelta


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
