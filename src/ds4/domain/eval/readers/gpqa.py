"""GPQA's CSV (gpqa_diamond.csv, gpqa_main.csv, ...): one row per question with the
correct answer and three incorrect ones in their own columns.

The file always lists the correct answer first, so the choices are put in an order
fixed by the record id (a SHA-256 byte picks the correct answer's letter; the
incorrect answers keep their column order around it): the same file gives the same
prompts on every run and machine.
"""

from __future__ import annotations

import hashlib

from ds4.domain.eval.case_schema import CaseDataError, CaseSet
from ds4.domain.eval.cases import CHOICE_LETTERS, AnswerKind, EvalCase
from ds4.domain.eval.readers.tables import csv_rows, header_of, pick, required_text

SOURCE = "GPQA"
REQUIRED = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
            "Incorrect Answer 3")  # fmt: skip


def looks_like_gpqa(text: str) -> bool:
    return set(REQUIRED) <= set(header_of(text))


def correct_position(record_id: str) -> int:
    return hashlib.sha256(record_id.encode("utf-8")).digest()[0] % 4


def parse_gpqa_csv(text: str, origin: str, source: str = SOURCE) -> CaseSet:
    if not looks_like_gpqa(text):
        raise CaseDataError(f"{origin}: not a GPQA CSV (needs the columns {', '.join(REQUIRED)})")
    out = CaseSet()
    for number, (where, row) in enumerate(csv_rows(text, origin), 1):
        record_id = str(pick(row, "Record ID") or "").strip() or f"row-{number}"
        correct = required_text(row, where, "Correct Answer")
        wrong = [required_text(row, where, f"Incorrect Answer {i}") for i in (1, 2, 3)]
        at = correct_position(record_id)
        choices = (*wrong[:at], correct, *wrong[at:])
        domain = str(pick(row, "High-level domain") or "").strip()
        sub = str(pick(row, "Subdomain") or "").strip()
        case = EvalCase(
            source=source,
            id=record_id,
            question=required_text(row, where, "Question"),
            answer=CHOICE_LETTERS[at],
            answer_kind=AnswerKind.MULTIPLE_CHOICE,
            domain=f"{domain}/{sub}" if domain and sub else domain or sub,
            choices=choices,
        )
        out.add_case(case, where)
    return out
