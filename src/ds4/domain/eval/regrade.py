"""Re-grade a trace without a model (docs/reference/eval.md §6.2): each record's model
output goes through today's extractor against the case's key."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from ds4.domain.eval.cases import EvalCase
from ds4.domain.eval.grading import Grade, grade_output
from ds4.domain.eval.trace_format import ParsedTrace, TraceCase

GRADED_STATUSES = ("PASSED", "FAILED", "")  # "" : a legacy trace without statuses
_NUMBER = re.compile(r"===== CASE (\d+)/")

CaseLookup = Callable[[str, str], EvalCase | None]


class Outcome(Enum):
    PASSED = "PASSED"
    FAILED = "FAILED"
    NOT_GRADED = "NOT_GRADED"


def regrade_one(case: EvalCase, status: str, output: str) -> tuple[Outcome, Grade]:
    grade = grade_output(case, output)
    if status not in GRADED_STATUSES:
        return Outcome.NOT_GRADED, grade
    return (Outcome.PASSED if grade.correct else Outcome.FAILED), grade


@dataclass
class RegradeSummary:
    total: int = 0
    passed: int = 0
    failed: int = 0
    changed: int = 0
    not_graded: int = 0
    unknown: int = 0
    parse_errors: int = 0
    lines: list[str] = field(default_factory=list)  # one per changed, unknown or bad record

    def line(self, path: str) -> str:
        return (
            f"ds4-eval: regraded {self.total} cases from {path}: passed={self.passed} "
            f"failed={self.failed} changed={self.changed} not_graded={self.not_graded} "
            f"unknown={self.unknown} parse_errors={self.parse_errors}"
        )

    @property
    def exit_code(self) -> int:
        return 1 if self.unknown or self.parse_errors or self.total == 0 else 0


def case_number(record: TraceCase, ordinal: int) -> int:
    match = _NUMBER.match(record.header)
    return int(match.group(1)) if match else ordinal


def regrade(trace: ParsedTrace, lookup: CaseLookup) -> RegradeSummary:
    out = RegradeSummary()
    for ordinal, record in enumerate(trace.cases, 1):
        out.total += 1
        number = case_number(record, ordinal)
        source, case_id = record.fields.get("source", ""), record.fields.get("id", "")
        output = record.text("MODEL_OUTPUT")
        if not source or not case_id or output is None:
            out.parse_errors += 1
            out.lines.append(f"case {number}: no source, id or MODEL_OUTPUT block")
            continue
        case = lookup(source, case_id)
        if case is None:
            out.unknown += 1
            out.lines.append(f"case {number} {source}/{case_id}: not in the loaded cases")
            continue
        status, traced_pick = record.fields.get("status", ""), record.fields.get("picked")
        outcome, grade = regrade_one(case, status, output)
        if outcome is Outcome.NOT_GRADED:
            out.not_graded += 1
            continue
        if outcome is Outcome.PASSED:
            out.passed += 1
        else:
            out.failed += 1
        status_changed = status not in ("", outcome.value)
        pick_changed = bool(traced_pick) and traced_pick != grade.picked
        if status_changed or pick_changed:
            out.changed += 1
            out.lines.append(
                f"case {number} {source}/{case_id}: trace {status} picked={traced_pick} -> "
                f"regrade {outcome.value} picked={grade.picked} expected={case.answer}"
            )
    return out
