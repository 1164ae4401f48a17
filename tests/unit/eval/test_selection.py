"""Which cases a run takes (docs/reference/eval.md §3)."""

from __future__ import annotations

import pytest

from ds4.domain.errors import Ds4Error
from ds4.domain.eval.cases import (
    AnswerKind,
    EvalCase,
    Selection,
    case_listing,
    parse_case_sequence,
    select_cases,
)

CASES = [
    EvalCase("A", "1", "q1", "1", AnswerKind.INTEGER, domain="physics/optics"),
    EvalCase("A", "2", "q2", "1", AnswerKind.INTEGER, domain="chemistry"),
    EvalCase("B", "3", "q3", "1", AnswerKind.INTEGER, suites=frozenset({"hard"})),
    EvalCase("B", "4", "q4", "1", AnswerKind.INTEGER, domain="Physics"),
]


def ids(sel: Selection) -> list[str]:
    return [c.id for c in select_cases(CASES, sel)]


def test_suites_and_filters() -> None:
    assert ids(Selection()) == ["1", "2", "4"]
    assert ids(Selection(suite="hard")) == ["3"]
    assert ids(Selection(suite="all")) == ["1", "2", "3", "4"]
    assert ids(Selection(sources=("b",))) == ["4"]
    assert ids(Selection(domains=("physics",))) == ["1", "4"]
    assert ids(Selection(case_ids=("2", "4"))) == ["2", "4"]


def test_sequence_then_questions() -> None:
    assert ids(Selection(sequence=(3, 1))) == ["4", "1"]
    assert ids(Selection(sequence=(3, 1), questions=1)) == ["4"]


def test_errors() -> None:
    with pytest.raises(Ds4Error, match="only 3 questions are selected"):
        select_cases(CASES, Selection(questions=4))
    with pytest.raises(Ds4Error, match="case 5 does not exist"):
        select_cases(CASES, Selection(sequence=(5,)))
    with pytest.raises(Ds4Error, match="no case matches"):
        select_cases(CASES, Selection(sources=("Z",)))


def test_parse_case_sequence() -> None:
    assert parse_case_sequence("3, 1,2") == (3, 1, 2)
    for bad in ("0", "1,,2", "x", "1,1"):
        with pytest.raises(ValueError):
            parse_case_sequence(bad)


def test_listing() -> None:
    assert case_listing(CASES[:1]) == ["  1 A/1  INTEGER  [core]  q1"]
