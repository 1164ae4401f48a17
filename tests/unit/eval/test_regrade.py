"""--regrade-trace (docs/reference/eval.md §6.2): which records are graded, what counts
as changed, the summary line and exit code."""

from __future__ import annotations

from ds4.domain.eval.cases import AnswerKind, EvalCase
from ds4.domain.eval.traces import RegradeOutcome, counted_block, parse_trace, regrade, regrade_one

CASES = {
    ("AIME", "a1"): EvalCase("AIME", "a1", "q", "82", AnswerKind.INTEGER),
    ("AIME", "a2"): EvalCase("AIME", "a2", "q", "7", AnswerKind.INTEGER),
    ("AIME", "a3"): EvalCase("AIME", "a3", "q", "9", AnswerKind.INTEGER),
}


def lookup(source: str, case_id: str) -> EvalCase | None:
    return CASES.get((source, case_id))


def record(
    n: int, case_id: str, status: str, picked: str, output: str, source: str = "AIME"
) -> str:
    return (
        f"===== CASE {n}/3 {source}/{case_id} =====\nsource: {source}\nid: {case_id}\n"
        f"status: {status}\npicked: {picked}\n" + counted_block("MODEL_OUTPUT", output) + "\n"
    )


def test_seed_example_one_passed_two_stopped() -> None:
    text = (
        record(1, "a1", "PASSED", "82", "</think>Answer: 82")
        + record(2, "a2", "STOPPED", "?", "thinking")
        + record(3, "a3", "STOPPED", "?", "thinking")
    )
    summary = regrade(parse_trace(text.encode()), lookup)
    assert (summary.total, summary.passed, summary.not_graded, summary.changed) == (3, 1, 2, 0)
    assert summary.exit_code == 0
    assert summary.line("t.trace") == (
        "ds4-eval: regraded 3 cases from t.trace: passed=1 failed=0 changed=0 not_graded=2 "
        "unknown=0 parse_errors=0"
    )


def test_changed_status_and_pick_are_reported() -> None:
    text = record(1, "a1", "FAILED", "80", "</think>Answer: 082")
    summary = regrade(parse_trace(text.encode()), lookup)
    assert summary.changed == 1 and summary.passed == 1
    assert summary.lines == [
        "case 1 AIME/a1: trace FAILED picked=80 -> regrade PASSED picked=82 expected=82"
    ]


def test_unknown_cases_and_parse_errors_fail_the_regrade() -> None:
    text = record(1, "zz", "PASSED", "1", "</think>Answer: 1") + (
        "===== CASE 2/3 AIME/a2 =====\nsource: AIME\nid: a2\nstatus: PASSED\n\n"
    )
    summary = regrade(parse_trace(text.encode()), lookup)
    assert (summary.unknown, summary.parse_errors, summary.exit_code) == (1, 1, 1)


def test_an_empty_trace_fails() -> None:
    assert regrade(parse_trace(b"# ds4-eval trace\n"), lookup).exit_code == 1


def test_outcomes_t2_t3_t4() -> None:
    case = CASES[("AIME", "a1")]
    assert regrade_one(case, "PASSED", "</think>Answer: 82")[0] is RegradeOutcome.PASSED
    assert regrade_one(case, "STOPPED", "</think>Answer: 82")[0] is RegradeOutcome.NOT_GRADED
    assert regrade_one(case, "", "</think>Answer: 82")[0] is RegradeOutcome.PASSED
    for status in ("SKIPPED", "SWITCHED", "ERROR"):
        assert regrade_one(case, status, "</think>Answer: 82")[0] is RegradeOutcome.NOT_GRADED
