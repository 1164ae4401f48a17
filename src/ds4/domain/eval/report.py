"""Where each case of a run stands and what it produced, and the final report
(docs/reference/eval.md §8): a line per case, then per source and per suite; and the
same as one JSON object for --json.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from ds4.domain.eval.cases import EvalCase, SourceInfo
from ds4.domain.eval.traces import ThinkClose

# --- results ---
# Where each case of a run stands, and what it produced.


class CaseState(Enum):
    PENDING = "PENDING"
    PREFILL = "PREFILL"
    RUNNING = "RUNNING"
    PASSED = "PASSED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"  # the prompt does not fit, or leaves no room to generate
    STOPPED = "STOPPED"  # the run was quit or interrupted during this case
    ERROR = "ERROR"  # the engine or endpoint failed (the run stops)

    @property
    def short(self) -> str:
        """The TUI's four-letter status."""
        return _SHORT[self]

    @property
    def graded(self) -> bool:
        return self in (CaseState.PASSED, CaseState.FAILED)


_SHORT = {
    CaseState.PENDING: "PEND",
    CaseState.PREFILL: "FILL",
    CaseState.RUNNING: "RUN",
    CaseState.PASSED: "PASS",
    CaseState.FAILED: "FAIL",
    CaseState.SKIPPED: "SKIP",
    CaseState.STOPPED: "STOP",
    CaseState.ERROR: "ERR",
}


@dataclass
class CaseResult:
    number: int  # 1-based position in the run
    case: EvalCase
    state: CaseState = CaseState.PENDING
    prompt_tokens: int = 0
    generated_tokens: int = 0
    limit: int = 0  # the generation limit L of the last attempt
    picked: str = ""
    elapsed: float = 0.0
    think_close: ThinkClose | None = None
    note: str | None = None  # why it was skipped, or the error
    attempts: int = 0
    output: str = ""

    @property
    def correct(self) -> bool | None:
        """True/False once graded, None otherwise."""
        return self.state is CaseState.PASSED if self.state.graded else None

    @property
    def given(self) -> str:
        """The answer as the report shows it (`-` when there is none)."""
        return self.picked if self.picked and self.state.graded else "-"


# --- report ---
# The final report (docs/reference/eval.md §8): a line per case, then per source and
# per suite; and the same as one JSON object for --json.

HEADER = "#   state      prompt      gen    total given    correct  test"


def hours_minutes(seconds: float) -> str:
    minutes = int(max(seconds, 0.0) // 60)
    return f"{minutes // 60:02d}h:{minutes % 60:02d}m"


def report_row(r: CaseResult) -> str:
    total = r.prompt_tokens + r.generated_tokens
    return (
        f"{r.number:3d} {r.state.value:<8} {r.prompt_tokens:8d} {r.generated_tokens:8d} "
        f"{total:8d} {r.given:<8} {r.case.answer:<8} {r.case.source}/{r.case.id}"
    )


@dataclass
class Tally:
    name: str
    passed: int = 0
    failed: int = 0
    other: int = 0  # skipped, stopped, not run, errors

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.other

    def add(self, r: CaseResult) -> None:
        if r.state is CaseState.PASSED:
            self.passed += 1
        elif r.state is CaseState.FAILED:
            self.failed += 1
        else:
            self.other += 1

    def line(self, width: int) -> str:
        graded = self.passed + self.failed
        pct = f"{100.0 * self.passed / graded:5.1f}%" if graded else "    -"
        return (
            f"  {self.name:<{width}} {self.passed:4d}/{self.total:<4d} passed  "
            f"{self.failed:4d} failed  {pct}"
        )


def tallies(results: Iterable[CaseResult], by_suite: bool) -> list[Tally]:
    table: dict[str, Tally] = {}
    for r in results:
        names = sorted(r.case.suites) if by_suite else [r.case.source]
        for name in names:
            table.setdefault(name, Tally(name)).add(r)
    return list(table.values())


def headline(results: Sequence[CaseResult], runtime: float) -> str:
    passed = sum(r.state is CaseState.PASSED for r in results)
    failed = sum(r.state is CaseState.FAILED for r in results)
    failed_part = f", {failed} failed" if failed else ""
    return (
        f"ds4-eval: {passed}/{len(results)} passed{failed_part}, runtime {hours_minutes(runtime)}"
    )


def render_report(
    results: Sequence[CaseResult], runtime: float, sources: Mapping[str, SourceInfo]
) -> str:
    lines = [headline(results, runtime), HEADER]
    lines += [report_row(r) for r in results]
    for title, by_suite in (("per source:", False), ("per suite:", True)):
        rows = tallies(results, by_suite)
        width = max(len(t.name) for t in rows) if rows else 0
        lines.append(title)
        for tally in rows:
            line = tally.line(width)
            info = None if by_suite else sources.get(tally.name)
            if info is not None:
                line += f"  ({info.license}, {info.url})"
            lines.append(line)
    notes = [f"  case {r.number}: {r.state.value.lower()}: {r.note}" for r in results if r.note]
    if notes:
        lines.append("notes:")
        lines += notes
    return "\n".join(lines) + "\n"


def _case_json(r: CaseResult) -> dict[str, object]:
    close = r.think_close
    return {
        "number": r.number,
        "id": r.case.id,
        "source": r.case.source,
        "domain": r.case.domain,
        "answer_kind": r.case.answer_kind.value,
        "state": r.state.value,
        "prompt_tokens": r.prompt_tokens,
        "generated_tokens": r.generated_tokens,
        "total_tokens": r.prompt_tokens + r.generated_tokens,
        "answer_given": r.picked if r.state.graded else None,
        "expected": r.case.answer,
        "correct": r.correct,
        "elapsed_sec": round(r.elapsed, 3),
        "attempts": r.attempts,
        "think_close": None if close is None else close.kind,
        "note": r.note,
    }


def _tally_json(t: Tally, info: SourceInfo | None) -> dict[str, object]:
    out: dict[str, object] = {
        "name": t.name,
        "passed": t.passed,
        "failed": t.failed,
        "total": t.total,
    }
    if info is not None:
        out["license"], out["url"] = info.license, info.url
    return out


def report_json(
    results: Sequence[CaseResult],
    runtime: float,
    sources: Mapping[str, SourceInfo],
    settings: Mapping[str, object],
) -> dict[str, object]:
    return {
        "passed": sum(r.state is CaseState.PASSED for r in results),
        "failed": sum(r.state is CaseState.FAILED for r in results),
        "total": len(results),
        "runtime_sec": round(runtime, 3),
        "settings": dict(settings),
        "cases": [_case_json(r) for r in results],
        "sources": [_tally_json(t, sources.get(t.name)) for t in tallies(results, False)],
        "suites": [_tally_json(t, None) for t in tallies(results, True)],
    }
