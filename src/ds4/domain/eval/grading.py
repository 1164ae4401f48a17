"""Grading an extracted answer against a case's key and aliases
(docs/reference/eval.md §5)."""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.eval.cases import AnswerKind, EvalCase
from ds4.domain.eval.extract import NOTHING, extract, normalize_integer, sequence_items
from ds4.domain.eval.line_sets import line_set_passes


def matches(kind: AnswerKind, picked: str, key: str) -> bool:
    """Whether `picked` is graded correct against one key."""
    if picked == NOTHING or not picked:
        return False
    if kind is AnswerKind.MULTIPLE_CHOICE:
        return bool(key) and picked[0].upper() == key[0].upper()
    if kind is AnswerKind.LINE_SET:
        return line_set_passes(picked, key)
    if kind is AnswerKind.ORDERED_SEQUENCE:
        want = sequence_items(key, key)
        return bool(want) and sequence_items(picked, key) == want
    return picked.isdigit() and normalize_integer(picked) == normalize_integer(key.strip())


def is_correct(case: EvalCase, picked: str) -> bool:
    return any(matches(case.answer_kind, picked, key) for key in (case.answer, *case.aliases))


@dataclass(frozen=True)
class Grade:
    picked: str
    correct: bool


def grade_output(case: EvalCase, output: str) -> Grade:
    picked = extract(case, output)
    return Grade(picked, is_correct(case, picked))
