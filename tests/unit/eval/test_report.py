"""The final report and its JSON (docs/reference/eval.md §8), and --compare."""

from __future__ import annotations

from ds4.domain.eval.cases import AnswerKind, EvalCase, SourceInfo
from ds4.domain.eval.report import (
    HEADER,
    CaseResult,
    CaseState,
    hours_minutes,
    render_report,
    report_json,
    report_row,
)
from ds4.domain.eval.traces import compare_traces, counted_block, parse_trace

CASE = EvalCase("GPQA Diamond", "recNu3MXkvWUzHZr9", "q", "B", AnswerKind.MULTIPLE_CHOICE,
                choices=("a", "b"))  # fmt: skip


def results() -> list[CaseResult]:
    return [
        CaseResult(1, CASE, CaseState.PASSED, 201, 2048, picked="B"),
        CaseResult(
            2,
            EvalCase("X", "i", "q", "7", AnswerKind.INTEGER, suites=frozenset({"hard"})),
            CaseState.SKIPPED,
            5000,
            0,
            note="prompt does not fit context",
        ),
        CaseResult(
            3,
            EvalCase("X", "j", "q", "8", AnswerKind.INTEGER),
            CaseState.FAILED,
            10,
            20,
            picked="?",
        ),
    ]


def test_row_format_is_the_reference_one() -> None:
    assert report_row(results()[0]) == (
        "  1 PASSED        201     2048     2249 B        B        GPQA Diamond/recNu3MXkvWUzHZr9"
    )
    assert report_row(results()[1]).split()[5] == "-"  # nothing given


def test_report_text() -> None:
    sources = {"GPQA Diamond": SourceInfo("GPQA Diamond", "CC BY 4.0", "https://x")}
    text = render_report(results(), 3725.0, sources)
    lines = text.splitlines()
    assert lines[0] == "ds4-eval: 1/3 passed, 1 failed, runtime 01h:02m"
    assert lines[1] == HEADER
    assert "per source:" in lines and "per suite:" in lines
    assert any("GPQA Diamond" in line and "(CC BY 4.0, https://x)" in line for line in lines)
    assert "  case 2: skipped: prompt does not fit context" in lines


def test_hours_minutes() -> None:
    assert hours_minutes(0) == "00h:00m"
    assert hours_minutes(59 * 60 + 59) == "00h:59m"
    assert hours_minutes(25 * 3600) == "25h:00m"


def test_json_cases_carry_id_state_answer_and_correctness() -> None:
    report = report_json(results(), 1.0, {}, {"seed": 1})
    cases = report["cases"]
    assert isinstance(cases, list)
    assert [(c["id"], c["state"], c["answer_given"], c["correct"]) for c in cases] == [
        ("recNu3MXkvWUzHZr9", "PASSED", "B", True),
        ("i", "SKIPPED", None, None),
        ("j", "FAILED", "?", False),
    ]
    assert (report["passed"], report["failed"], report["total"]) == (1, 1, 3)
    suite_rows = report["suites"]
    assert isinstance(suite_rows, list)
    suites = {s["name"]: (s["passed"], s["total"]) for s in suite_rows}
    assert suites == {"core": (1, 2), "hard": (0, 1)}


def trace(*rows: tuple[str, str, str]) -> bytes:
    text = "# ds4-eval trace\nbackend: cpu\nmodel: m\n\n"
    for case_id, status, picked in rows:
        text += (
            f"===== CASE 1/3 S/{case_id} =====\nsource: S\nid: {case_id}\nstatus: {status}\n"
            f"picked: {picked}\nexpected: 1\ngenerated_tokens: 9\n"
            + counted_block("MODEL_OUTPUT", "x")
        )
    return text.encode()


def test_compare_two_traces() -> None:
    a = parse_trace(trace(("1", "PASSED", "1"), ("2", "FAILED", "3"), ("3", "PASSED", "1")))
    b = parse_trace(trace(("1", "PASSED", "1"), ("2", "PASSED", "1"), ("4", "FAILED", "0")))
    result = compare_traces(a, b, "a.trace", "b.trace")
    assert (result.both_passed, result.only_a, result.only_b, result.not_comparable) == (1, 0, 1, 2)
    rows = [line for line in result.lines if line.startswith("  ")]
    assert rows[1].endswith("S/2  *") and not rows[0].endswith("*")
    assert result.lines[-1] == result.summary()
