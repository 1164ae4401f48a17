"""MMLU-Pro exported as JSON Lines or CSV: question_id, question, options (up to ten),
answer (a letter), answer_index, category. In a CSV the options cell holds a JSON
list."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from ds4.domain.eval.case_schema import CaseDataError, CaseSet, json_lines
from ds4.domain.eval.cases import CHOICE_LETTERS, MAX_CHOICES, AnswerKind, EvalCase
from ds4.domain.eval.readers.tables import csv_rows, header_of, pick, required_text

SOURCE = "MMLU-Pro"


def looks_like_mmlu_pro(obj: Mapping[str, object]) -> bool:
    return "options" in obj and "question" in obj and ("answer" in obj or "answer_index" in obj)


def looks_like_mmlu_pro_csv(text: str) -> bool:
    return looks_like_mmlu_pro(dict.fromkeys(header_of(text), ""))


def _options(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise CaseDataError(f"{where}: 'options' is not a JSON list") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CaseDataError(f"{where}: 'options' must be a list of strings")
    options = tuple(v.strip() for v in value)
    if not 2 <= len(options) <= MAX_CHOICES or not all(options):
        raise CaseDataError(f"{where}: 'options' must hold 2..{MAX_CHOICES} non-empty strings")
    return options


def _letter(obj: Mapping[str, object], n: int, where: str) -> str:
    letter = str(pick(obj, "answer") or "").strip().upper()
    index = pick(obj, "answer_index")
    if not letter and index is not None and str(index).strip().isdigit():
        position = int(str(index).strip())
        letter = CHOICE_LETTERS[position] if position < n else ""
    if len(letter) != 1 or letter not in CHOICE_LETTERS[:n]:
        raise CaseDataError(f"{where}: answer {letter!r} is not one of {CHOICE_LETTERS[:n]}")
    return letter


def _cases(rows: Iterable[tuple[str, Mapping[str, object]]], source: str) -> CaseSet:
    out = CaseSet()
    for number, (where, obj) in enumerate(rows, 1):
        if not looks_like_mmlu_pro(obj):
            raise CaseDataError(f"{where}: an MMLU-Pro row needs question, options and answer")
        options = _options(obj.get("options"), where)
        raw_id = pick(obj, "question_id", "id")
        case = EvalCase(
            source=source,
            id=str(raw_id).strip() if raw_id is not None and str(raw_id).strip() else str(number),
            question=required_text(obj, where, "question"),
            answer=_letter(obj, len(options), where),
            answer_kind=AnswerKind.MULTIPLE_CHOICE,
            domain=str(pick(obj, "category") or "").strip(),
            choices=options,
        )
        out.add_case(case, where)
    return out


def parse_mmlu_pro_lines(text: str, origin: str, source: str = SOURCE) -> CaseSet:
    return _cases(json_lines(text, origin), source)


def parse_mmlu_pro_csv(text: str, origin: str, source: str = SOURCE) -> CaseSet:
    return _cases(csv_rows(text, origin), source)
