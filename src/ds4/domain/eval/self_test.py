"""`ds4 eval --self-test-extractors` (docs/reference/eval.md §7): the extractor table
and the trace-structure checks, run without a model."""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.eval.cases import CHOICE_LETTERS, AnswerKind, EvalCase
from ds4.domain.eval.grading import grade_output
from ds4.domain.eval.traces import (
    RegradeOutcome,
    counted_block,
    next_marker,
    parse_trace,
    regrade_one,
)

PASSED_LINE = "ds4-eval: answer extractor self-tests passed"

_MC10 = tuple(f"choice {letter}" for letter in CHOICE_LETTERS)
_MC4 = _MC10[:4]


def _mc(key: str, choices: tuple[str, ...] = _MC10) -> EvalCase:
    return EvalCase("SELFTEST", "mc", "q", key, AnswerKind.MULTIPLE_CHOICE, choices=choices)


def _int(key: str) -> EvalCase:
    return EvalCase("SELFTEST", "int", "q", key, AnswerKind.INTEGER)


def _lines(key: str) -> EvalCase:
    return EvalCase("COMPSEC", "lines", "q", key, AnswerKind.LINE_SET)


@dataclass(frozen=True)
class ExtractorCase:
    name: str
    case: EvalCase
    output: str
    expected: str


TABLE = (
    ExtractorCase(
        "MC prefers final answer marker",
        _mc("F"),
        "</think>So answer is 0.716 H+/O2. That corresponds to option F.\n"
        "Thus final answer: F.</think>The visible explanation repeats the calculation.\n"
        "Answer: F",
        "F",
    ),
    ExtractorCase(
        "MC prefers Answer-colon over later prose",
        _mc("F"),
        "</think>Answer: F\nThis answer is final; option H is a tempting distractor.",
        "F",
    ),
    ExtractorCase(
        "MC preserves loose-answer fallback",
        _mc("F"),
        "</think>The answer is F. This answer is final; option H is tempting.",
        "F",
    ),
    ExtractorCase(
        "integer prefers final answer marker",
        _int("82"),
        "</think>I first thought the answer was 80.\nFinal answer: 082",
        "82",
    ),
    ExtractorCase(
        "integer preserves loose-answer fallback",
        _int("82"),
        "</think>The answer is 082. This answer comes from AIME 2025.",
        "82",
    ),
    ExtractorCase(
        "COMPSEC prefers final answer marker",
        _lines("9-10"),
        "</think>I think the answer should be line 10, because CWE-122 may apply.\n"
        "**Answer:** 10</think>The primary write is at line 10.\nAnswer: 10",
        "10",
    ),
    ExtractorCase(
        'MC: leading pronoun "I" does not shadow the pick',
        _mc("C"),
        "</think>Answer: I think it is C",
        "C",
    ),
    ExtractorCase(
        "MC: contraction I'll does not shadow the pick",
        _mc("C"),
        "</think>Answer: I'll go with C.",
        "C",
    ),
    ExtractorCase(
        'MC: leading article "A" does not shadow the pick',
        _mc("C"),
        "</think>Answer: A careful reading shows C.",
        "C",
    ),
    ExtractorCase(
        'MC: genuine standalone "I" answer still picked', _mc("I"), "</think>Answer: I.", "I"
    ),
    ExtractorCase(
        "MC: out-of-range pronoun harmless on 4 choices",
        _mc("D", _MC4),
        "</think>Answer: I think it is D",
        "D",
    ),
    ExtractorCase(
        'MC: "not B" before the pick does not shadow it',
        _mc("D"),
        "</think>Answer: It is not B, the answer is D",
        "D",
    ),
    ExtractorCase(
        'MC: "rules out C, leaving D"', _mc("D"), "</think>Answer: rules out C, leaving D", "D"
    ),
    ExtractorCase(
        "MC: contraction negation (isn't B) skipped",
        _mc("D"),
        "</think>Answer: It isn't B, so D",
        "D",
    ),
    ExtractorCase(
        'MC: leading pick followed by "not B" is still the pick',
        _mc("D"),
        "</think>Answer: D, not B",
        "D",
    ),
    ExtractorCase(
        "integer: sum line grades the total",
        _int("293"),
        "</think>Answer: m+n = 256+37 = 293",
        "293",
    ),
    ExtractorCase(
        "integer: three-term sum line",
        _int("62"),
        "</think>Answer: a+b+c = 12+25+25 = 62",
        "62",
    ),
    ExtractorCase(
        "integer: product-sum line grades the result",
        _int("81"),
        "</think>Answer: 2*7 + 3*6 + 5*4 + 7*5 = 81",
        "81",
    ),
    ExtractorCase(
        "integer: digits on a later line do not override",
        _int("82"),
        "</think>Answer: 82\nThe value 2025 is just the year.",
        "82",
    ),
)


def _extraction_failures() -> list[str]:
    failures = []
    for row in TABLE:
        grade = grade_output(row.case, row.output)
        if grade.picked != row.expected or not grade.correct:
            failures.append(
                f"ds4-eval: extractor self-test failed: {row.name} "
                f"(got {grade.picked}, expected {row.expected}, key {row.case.answer})"
            )
    return failures


T1_PROMPT = "Prompt text may mention\nMODEL_OUTPUT_BEGIN without being the model block.\n"
T1_OUTPUT = (
    "</think>Trace payload may mention\nMODEL_OUTPUT_END before the real marker.\n"
    "===== CASE not a real case =====\nAnswer: F"
)
T1_SECOND = "===== CASE 2/2 SuperGPQA/trace-copy-self-test-2 ====="


def t1_trace() -> bytes:
    """Two records; the first holds fake markers inside its counted blocks."""
    first = (
        "===== CASE 1/2 SuperGPQA/trace-copy-self-test =====\n"
        "source: SuperGPQA\nid: trace-copy-self-test\nstatus: PASSED\npicked: F\n"
        + counted_block("QUESTION_PROMPT", T1_PROMPT)
        + counted_block("MODEL_OUTPUT", T1_OUTPUT)
        + "\n"
    )
    second = f"{T1_SECOND}\nsource: SuperGPQA\nid: trace-copy-self-test-2\n"
    return (first + second).encode("utf-8")


def _structural_failures() -> list[str]:
    failures = []
    data = t1_trace()
    after_header = data.index(b"\n") + 1
    found = next_marker(data, after_header)
    line = data[found : data.index(b"\n", found)] if found is not None else b""
    trace = parse_trace(data)
    copied = trace.cases[0].blocks.get("MODEL_OUTPUT") if trace.cases else None
    if line.decode() != T1_SECOND or copied != T1_OUTPUT.encode() or len(trace.cases) != 2:
        failures.append(
            "ds4-eval: extractor self-test failed: trace marker skip + byte copy "
            f"(got {line.decode('utf-8', 'replace')!r}, expected {T1_SECOND!r})"
        )
    for name, status, expected in (
        ("regrade: PASSED trace graded", "PASSED", RegradeOutcome.PASSED),
        ("regrade: STOPPED not graded", "STOPPED", RegradeOutcome.NOT_GRADED),
        ("regrade: legacy empty status graded", "", RegradeOutcome.PASSED),
    ):
        outcome, _ = regrade_one(_int("82"), status, "</think>Answer: 82")
        if outcome is not expected:
            failures.append(
                f"ds4-eval: extractor self-test failed: {name} "
                f"(got {outcome.value}, expected {expected.value}, key 82)"
            )
    return failures


def run_self_tests() -> list[str]:
    """One line per failed check; empty when everything passed."""
    return _extraction_failures() + _structural_failures()
