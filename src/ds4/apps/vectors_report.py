"""What `ds4 test-vectors` prints per case and step, and its --json report."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from ds4.apps.cli_command import display_piece
from ds4.domain.vectors.local_run import AlternativeCheck, CaseReport, LocalToken, StepReport
from ds4.domain.vectors.records import VectorToken

REPORT_SCHEMA = "ds4-test-vectors-report-v1"
SHOWN_PROBLEMS = 3


def _f(value: float | None, places: int = 3) -> str:
    return "-" if value is None else f"{value:.{places}f}"


def case_text(report: CaseReport, top_k: int, tolerance: float, seconds: float) -> str:
    case = report.case
    recorded = "" if case.prompt_tokens is None else f" (recorded {case.prompt_tokens})"
    verdict = "PASS" if report.passed else f"FAIL at step {report.first_failure}"
    lines = [
        f"{verdict}  {case.id}: ctx {case.ctx}, {report.prompt_tokens} prompt tokens{recorded}, "
        f"max |Δlogprob| {_f(report.max_abs_delta)}, {seconds:.2f} s"
    ]
    if case.prompt_tokens is not None and case.prompt_tokens != report.prompt_tokens:
        lines.append(
            "  note: the prompt token counts differ: this tokenizer or chat encoding is not "
            "the one the vectors were recorded with"
        )
    for step in report.steps:
        lines.append("  " + _step_text(step, top_k, tolerance))
    return "\n".join(lines)


def _step_text(step: StepReport, top_k: int, tolerance: float) -> str:
    mine = step.recorded_local
    where = "absent" if mine is None else f"rank {mine.rank}, logprob {_f(mine.logprob)}"
    text = (
        f"step {step.index}: {'ok  ' if step.passed else 'FAIL'} "
        f"recorded {display_piece(step.recorded.raw)} ({_f(step.recorded_logprob)}) here {where}; "
        f"argmax {display_piece(step.chosen.raw)} ({_f(step.chosen.logprob)}); "
        f"max |Δ| {_f(step.max_abs_delta)}"
    )
    problems = step.problems(top_k, tolerance)
    if len(problems) > SHOWN_PROBLEMS:  # the --json report lists every one
        more = len(problems) - SHOWN_PROBLEMS
        problems = [*problems[:SHOWN_PROBLEMS], f"{more} more alternatives"]
    return text + (" -- " + "; ".join(problems) if problems else "")


def summary_text(reports: Sequence[CaseReport]) -> str:
    passed = sum(1 for r in reports if r.passed)
    failed = [r.case.id for r in reports if not r.passed]
    tail = f"; failed: {', '.join(failed)}" if failed else ""
    return f"test-vectors: {passed}/{len(reports)} cases passed{tail}"


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def _token(token: VectorToken) -> dict[str, object]:
    return {"text": token.text, "bytes": list(token.raw)}


def _local(token: LocalToken | None) -> dict[str, object] | None:
    if token is None:
        return None
    return {
        "id": token.id,
        "text": token.raw.decode("utf-8", errors="replace"),
        "bytes": list(token.raw),
        "logprob": _num(token.logprob),
        "rank": token.rank,
    }


def _alternative(alt: AlternativeCheck) -> dict[str, object]:
    return {
        "token": _token(alt.token),
        "recorded_logprob": alt.recorded,
        "local": _local(alt.local),
        "delta": _num(alt.delta),
        "ok": alt.ok,
    }


def report_json(
    reports: Sequence[CaseReport], run: Mapping[str, object], top_k: int, tolerance: float
) -> bytes:
    """The whole run as one JSON object (schema ds4-test-vectors-report-v1)."""
    body = {
        "schema": REPORT_SCHEMA,
        **run,
        "top_k": top_k,
        "tolerance": tolerance,
        "passed": all(r.passed for r in reports),
        "cases_passed": sum(1 for r in reports if r.passed),
        "cases": [
            {
                "id": r.case.id,
                "kind": r.case.kind,
                "ctx": r.case.ctx,
                "passed": r.passed,
                "first_failing_step": r.first_failure,
                "max_abs_delta": _num(r.max_abs_delta),
                "prompt_tokens": r.prompt_tokens,
                "recorded_prompt_tokens": r.case.prompt_tokens,
                "steps": [
                    {
                        "step": s.index,
                        "passed": s.passed,
                        "argmax_ok": s.argmax_ok,
                        "recorded": _token(s.recorded),
                        "recorded_logprob": s.recorded_logprob,
                        "recorded_here": _local(s.recorded_local),
                        "argmax": _local(s.chosen),
                        "max_abs_delta": _num(s.max_abs_delta),
                        "alternatives": [_alternative(a) for a in s.alternatives],
                        "problems": s.problems(top_k, tolerance),
                    }
                    for s in r.steps
                ],
            }
            for r in reports
        ],
    }
    return (json.dumps(body, indent=1, ensure_ascii=False) + "\n").encode()
