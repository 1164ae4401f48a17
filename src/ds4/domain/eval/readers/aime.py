"""AIME-style JSON Lines: one problem per line with an integer answer (the field
names the public mirrors use: problem/question, answer, id/problem_idx)."""

from __future__ import annotations

from collections.abc import Mapping

from ds4.domain.eval.case_schema import CaseDataError, CaseSet, json_lines
from ds4.domain.eval.cases import AnswerKind, EvalCase
from ds4.domain.eval.readers.tables import pick, required_text

SOURCE = "AIME"
QUESTION_FIELDS = ("problem", "Problem", "question", "Question")
ANSWER_FIELDS = ("answer", "Answer", "gold_answer", "expected_answer")
ID_FIELDS = ("id", "ID", "problem_idx", "problem_id")


def looks_like_aime(obj: Mapping[str, object]) -> bool:
    return pick(obj, *QUESTION_FIELDS) is not None and pick(obj, *ANSWER_FIELDS) is not None


def _answer(obj: Mapping[str, object], where: str) -> str:
    value = pick(obj, *ANSWER_FIELDS)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip() if isinstance(value, int | str) else ""
    if isinstance(value, bool) or not text.isdigit():
        raise CaseDataError(f"{where}: answer {value!r} is not a non-negative integer")
    return text


def parse_aime_lines(text: str, origin: str, source: str = SOURCE) -> CaseSet:
    out = CaseSet()
    for number, (where, obj) in enumerate(json_lines(text, origin), 1):
        if not looks_like_aime(obj):
            raise CaseDataError(
                f"{where}: an AIME-style line needs a problem ({'/'.join(QUESTION_FIELDS)}) "
                f"and an answer ({'/'.join(ANSWER_FIELDS)})"
            )
        raw_id = pick(obj, *ID_FIELDS)
        case_id = str(raw_id).strip() if raw_id is not None else ""
        case = EvalCase(
            source=source,
            id=case_id or f"{number}",
            question=required_text(obj, where, *QUESTION_FIELDS),
            answer=_answer(obj, where),
            answer_kind=AnswerKind.INTEGER,
        )
        out.add_case(case, where)
    return out
