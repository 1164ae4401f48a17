"""Answer extraction and grading (docs/reference/eval.md §5): the self-test table row by
row, and the rules around it the table does not pin."""

from __future__ import annotations

import pytest

from ds4.domain.eval.cases import AnswerKind, EvalCase
from ds4.domain.eval.grading import (
    answer_marker,
    compact_line_spec,
    extract,
    extract_choice,
    extract_integer,
    extract_line_set,
    grade_output,
    has_final_answer_line,
    is_correct,
    line_set,
    line_set_passes,
    matches,
    normalize_integer,
    visible_text,
)
from ds4.domain.eval.self_test import TABLE, run_self_tests


@pytest.mark.parametrize("row", TABLE, ids=lambda r: r.name)
def test_self_test_table_row(row) -> None:  # type: ignore[no-untyped-def]
    grade = grade_output(row.case, row.output)
    assert grade.picked == row.expected
    assert grade.correct


def test_the_whole_self_test_passes() -> None:
    assert run_self_tests() == []


def test_the_table_has_all_nineteen_rows() -> None:
    assert len(TABLE) == 19


def test_visible_text_starts_after_the_first_think_close() -> None:
    assert visible_text(b"a</think>b</think>c") == b"b</think>c"
    assert visible_text(b"no close") == b"no close"


def test_marker_is_the_last_answer_colon_else_the_first_answer() -> None:
    text = b"answer is 1. Answer: 2. Final answer : 3"
    assert answer_marker(text) == text.rindex(b"answer : 3")
    assert answer_marker(b"x answered then answer") == 2  # no colon: first occurrence, any
    assert answer_marker(b"nothing") is None
    # a word that only contains "answer" is not a colon marker
    assert answer_marker(b"Answers: 4") == 0  # fallback: the first occurrence


def test_mc_backward_scan_when_there_is_no_marker() -> None:
    assert extract_choice(b"</think>I pick B, then again C.", 4) == "C"
    assert extract_choice(b"</think>nothing here", 4) == "?"


def test_mc_letters_outside_the_choices_are_not_candidates() -> None:
    assert extract_choice(b"</think>Answer: E", 4) == "?"


def test_mc_negation_never_looks_across_a_newline() -> None:
    # "not" ends the line before the pick: the pick is not negated
    assert extract_choice(b"</think>Answer: this is not\nB", 4) == "B"


def test_mc_negation_words_are_skipped() -> None:
    assert extract_choice(b"</think>Answer: excluding A, C", 4) == "C"
    assert extract_choice(b"</think>Answer: we ruled out B; D", 4) == "D"


def test_mc_marker_window_is_96_bytes() -> None:
    text = b"</think>Answer: " + b"x" * 100 + b" C"
    # nothing survives in the window: the backward scan finds C
    assert extract_choice(text, 4) == "C"


def test_integer_rules() -> None:
    assert extract_integer(b"</think>Answer: 5 apples = 12") == "12"
    assert extract_integer(b"</think>Answer: =  no digits 7") == "7"  # '=' without digits
    assert extract_integer(b"</think>So 3 then 41") == "41"  # no marker: the last run
    assert extract_integer(b"</think>Answer: -5") == "5"  # signs are not read
    assert extract_integer(b"</think>Answer: 3.7") == "3"
    assert extract_integer(b"</think>no digits") == "?"


@pytest.mark.parametrize(("digits", "normal"), [("082", "82"), ("000", "0"), ("7", "7"), ("", "?")])
def test_normalize_integer(digits: str, normal: str) -> None:
    assert normalize_integer(digits) == normal


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("line 9", "9"),
        ("9 and 15", "9,15"),
        ("20 - 22", "20-22"),
        ("3, 13-15", "3,13-15"),
        ("12-", "12"),
        ("none", ""),
    ],
)
def test_compact_line_spec(text: str, spec: str) -> None:
    assert compact_line_spec(text) == spec


def test_line_sets_clamp_and_swap() -> None:
    assert line_set("15-13") == {13, 14, 15}
    assert line_set("300") == {255}
    assert line_set("x,4") == {4}


@pytest.mark.parametrize(
    ("picked", "key", "passes"),
    [("10", "9-10", True), ("9,12", "9-10", False), ("0", "0", True), ("", "1", False)],
)
def test_line_set_grading(picked: str, key: str, passes: bool) -> None:
    assert line_set_passes(picked, key) is passes


def test_line_set_falls_back_to_the_integer_extractor() -> None:
    assert extract_line_set(b"</think>Answer: none of them\nthe bug is at 14") == "14"


def _case(kind: AnswerKind, answer: str, **extra: object) -> EvalCase:
    return EvalCase("S", "c", "q", answer, kind, **extra)  # type: ignore[arg-type]


def test_sequence_letters_digits_and_words() -> None:
    letters = _case(AnswerKind.ORDERED_SEQUENCE, "D,B,A,C")
    assert extract(letters, "</think>Answer: D, B, A, C") == "D,B,A,C"
    assert grade_output(letters, "</think>Answer: D B A C").correct
    assert not grade_output(letters, "</think>Answer: B, D, A, C").correct
    numbers = _case(AnswerKind.ORDERED_SEQUENCE, "3,2,1,4")
    assert grade_output(numbers, "</think>Answer: 3, 2, 1, 04").correct
    words = _case(AnswerKind.ORDERED_SEQUENCE, "Tom,Pia,Sam")
    assert grade_output(words, "</think>Answer: tom,  Pia, SAM").correct
    assert extract(words, "</think>no marker") == "?"


def test_aliases_are_accepted() -> None:
    case = _case(AnswerKind.ORDERED_SEQUENCE, "fig,pear,plum", aliases=("fig,plum,pear",))
    assert is_correct(case, "fig,plum,pear")
    assert not is_correct(case, "pear,fig,plum")


def test_grading_never_accepts_nothing() -> None:
    for kind in AnswerKind:
        assert not matches(kind, "?", "1")


def test_final_answer_line_detection() -> None:
    assert has_final_answer_line(b"think</think>Answer: 3")
    assert not has_final_answer_line(b"Answer: 3 in reasoning</think>no line")
    assert not has_final_answer_line(b"the answer is 3")  # no colon: not a final line
    # without </think> the whole output is visible, as it is to the extractor
    assert has_final_answer_line(b"still thinking, Answer: 3")
