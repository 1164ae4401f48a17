"""The trace file (docs/reference/eval.md §6): records render and parse back byte for
byte, counted blocks hide marker-like text, legacy records still read."""

from __future__ import annotations

from ds4.domain.eval.cases import AnswerKind, EvalCase
from ds4.domain.eval.self_test import T1_OUTPUT, T1_SECOND, t1_trace
from ds4.domain.eval.traces import (
    ThinkClose,
    TraceHeader,
    TraceRecord,
    counted_block,
    next_marker,
    parse_trace,
    render_record,
    render_summary,
)

MC = EvalCase("GPQA", "rec1", "Which?", "B", AnswerKind.MULTIPLE_CHOICE, choices=("x", "y"))
INT = EvalCase("AIME", "a-1", "How many?", "82", AnswerKind.INTEGER, domain="math")


def record(case: EvalCase, output: str, **extra: object) -> TraceRecord:
    fields: dict[str, object] = dict(
        number=1, of=2, case=case, timestamp_unix=1700000000, status="PASSED", picked="B",
        prompt_tokens=10, generated_tokens=20, elapsed_sec=1.23456, temperature=0.0,
        top_p=1.0, min_p=0.05, think_mode_effective="high", system_prompt="sys",
        question_prompt="question\nwith lines\n", model_output=output,
    )  # fmt: skip
    fields.update(extra)
    return TraceRecord(**fields)  # type: ignore[arg-type]


def header() -> TraceHeader:
    return TraceHeader(
        1700000000, "m.gguf", "cpu", 4096, 16000, 201, 2, 0.0, 1.0, 0.05, 7, "high", 1024, 512, 3
    )


def test_header_fields_in_order() -> None:
    text = header().render()
    assert text.splitlines()[:5] == [
        "# ds4-eval trace", "started_unix: 1700000000", "model: m.gguf", "backend: cpu", "ctx: 4096"
    ]  # fmt: skip
    assert "temperature: 0\n" in text and "min_p: 0.05\n" in text
    assert text.endswith("soft_limit_think_close_rank: 3\n\n")


def test_counted_block_adds_a_newline_only_when_missing() -> None:
    assert counted_block("X", "ab\n") == "X_BEGIN bytes=3\nab\nX_END\n"
    assert counted_block("X", "ab") == "X_BEGIN bytes=2\nab\nX_END\n"
    assert counted_block("X", "é") == "X_BEGIN bytes=2\né\nX_END\n"


def test_record_round_trip_keeps_tricky_output_exact() -> None:
    tricky = "</think>x\n===== CASE 9/9 fake =====\nMODEL_OUTPUT_END\nstatus: FAILED\nÀnswer: B"
    close = ThinkClose("hard_forced", 40, 512, 7)
    text = header().render()
    text += render_record(record(MC, tricky, think_close=close))
    text += render_record(record(INT, "no newline at end", number=2, status="STOPPED"))
    text += render_summary(1, 0, 2)
    trace = parse_trace(text.encode())
    assert trace.header["model"] == "m.gguf"
    assert len(trace.cases) == 2
    first, second = trace.cases
    assert first.blocks["MODEL_OUTPUT"] == tricky.encode()
    assert first.fields["status"] == "PASSED"  # not the fake status inside the output
    assert first.fields["think_close"] == "hard_forced"
    assert first.fields["think_close_rank"] == "7"
    assert first.fields["elapsed_sec"] == "1.235"
    assert first.text("QUESTION_PROMPT") == "question\nwith lines\n"
    assert "choices" in first.fields and "answer_kind" not in first.fields
    assert second.fields["answer_kind"] == "exact_integer"
    assert second.blocks["MODEL_OUTPUT"] == b"no newline at end"
    assert second.fields["status"] == "STOPPED"


def test_t1_marker_skip_and_byte_copy() -> None:
    data = t1_trace()
    found = next_marker(data, data.index(b"\n") + 1)
    assert found is not None
    assert data[found:].split(b"\n", 1)[0].decode() == T1_SECOND
    assert parse_trace(data).cases[0].blocks["MODEL_OUTPUT"] == T1_OUTPUT.encode()


def test_a_wrong_byte_count_is_not_a_block() -> None:
    data = (
        b"===== CASE 1/2 S/a =====\nsource: S\nid: a\n"
        b"MODEL_OUTPUT_BEGIN bytes=3\nabcdef\nMODEL_OUTPUT_END\n"
        b"===== CASE 2/2 S/b =====\nsource: S\nid: b\n"
    )
    trace = parse_trace(data)
    assert [c.fields["id"] for c in trace.cases] == ["a", "b"]
    assert "MODEL_OUTPUT" not in trace.cases[0].blocks  # malformed: not copied


def test_legacy_output_block_without_a_count() -> None:
    data = (
        b"===== CASE 1/1 S/a =====\nsource: S\nid: a\nstatus: \n"
        b"MODEL_OUTPUT_BEGIN\n</think>Answer: 3\nMODEL_OUTPUT_END\n"
    )
    case = parse_trace(data).cases[0]
    assert case.blocks["MODEL_OUTPUT"] == b"</think>Answer: 3"
    assert case.fields["status"] == ""
