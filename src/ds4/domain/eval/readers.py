"""Case files in (docs/eval.md "Case files", "Sources"): the readers for the formats public
benchmarks ship in (text in, EvalCases out), which one a file needs, the sources table,
and `ds4 eval --validate-cases`.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from ds4.domain.eval.case_schema import CaseDataError, CaseSet, json_lines, parse_case_lines
from ds4.domain.eval.cases import CHOICE_LETTERS, MAX_CHOICES, AnswerKind, EvalCase, SourceInfo

# --- tables ---
# Shared bits of the readers: CSV rows from text, field access with a clear error.


def csv_rows(text: str, origin: str) -> Iterator[tuple[str, dict[str, str]]]:
    """(file:line, row) for each record of a CSV text with a header row.

    Lines are split on "\\n" only, so form feeds or other separators inside a field
    stay part of it."""
    lines = [line + "\n" for line in text.split("\n")]
    if lines and lines[-1] == "\n":
        lines.pop()
    reader = csv.DictReader(lines, strict=True)
    try:
        for row in reader:
            if None in row:
                raise CaseDataError(f"{origin}:{reader.line_num}: more cells than header columns")
            yield f"{origin}:{reader.line_num}", {k: v or "" for k, v in row.items()}
    except csv.Error as error:
        raise CaseDataError(f"{origin}:{reader.line_num}: bad CSV ({error})") from None


def header_of(text: str) -> list[str]:
    first = text.split("\n", 1)[0]
    try:
        return next(csv.reader([first]), [])
    except csv.Error:
        return []


def pick(row: Mapping[str, object], *names: str) -> object:
    """The first of `names` present in the row (None if none is)."""
    for name in names:
        if name in row and row[name] is not None:
            return row[name]
    return None


def required_text(row: Mapping[str, object], where: str, *names: str) -> str:
    value = pick(row, *names)
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise CaseDataError(f"{where}: missing {' or '.join(repr(n) for n in names)}")
    return value.strip()


# --- aime ---
# AIME-style JSON Lines: one problem per line with an integer answer (the field
# names the public mirrors use: problem/question, answer, id/problem_idx).

AIME_SOURCE = "AIME"
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


def parse_aime_lines(text: str, origin: str, source: str = AIME_SOURCE) -> CaseSet:
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


# --- gpqa ---
# GPQA's CSV (gpqa_diamond.csv, gpqa_main.csv, ...): one row per question with the
# correct answer and three incorrect ones in their own columns.
#
# The file always lists the correct answer first, so the choices are put in an order
# fixed by the record id (a SHA-256 byte picks the correct answer's letter; the
# incorrect answers keep their column order around it): the same file gives the same
# prompts on every run and machine.

GPQA_SOURCE = "GPQA"
REQUIRED = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
            "Incorrect Answer 3")  # fmt: skip


def looks_like_gpqa(text: str) -> bool:
    return set(REQUIRED) <= set(header_of(text))


def correct_position(record_id: str) -> int:
    return hashlib.sha256(record_id.encode("utf-8")).digest()[0] % 4


def parse_gpqa_csv(text: str, origin: str, source: str = GPQA_SOURCE) -> CaseSet:
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


# --- mmlu pro ---
# MMLU-Pro exported as JSON Lines or CSV: question_id, question, options (up to ten),
# answer (a letter), answer_index, category. In a CSV the options cell holds a JSON
# list.

MMLU_PRO_SOURCE = "MMLU-Pro"


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


def parse_mmlu_pro_lines(text: str, origin: str, source: str = MMLU_PRO_SOURCE) -> CaseSet:
    return _cases(json_lines(text, origin), source)


def parse_mmlu_pro_csv(text: str, origin: str, source: str = MMLU_PRO_SOURCE) -> CaseSet:
    return _cases(csv_rows(text, origin), source)


# --- formats ---
# Which reader a case file needs (docs/eval.md "Case files"): named with
# --cases-format, or told from the file's name and first record.

Reader = Callable[[str, str], CaseSet]

READERS: dict[str, Reader] = {
    "ds4": parse_case_lines,
    "gpqa-csv": parse_gpqa_csv,
    "aime-jsonl": parse_aime_lines,
    "mmlu-pro-jsonl": parse_mmlu_pro_lines,
    "mmlu-pro-csv": parse_mmlu_pro_csv,
}
AUTO = "auto"
FORMAT_NAMES = (AUTO, *READERS)
_OURS = ("record", "answer_kind", "suites", "aliases", "max_tokens")


def _first_object(text: str) -> dict[str, object] | None:
    for line in text.splitlines():
        if line.strip():
            try:
                value = json.loads(line)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def detect_format(name: str, text: str) -> str:
    """The reader for a file, from its name and first record; CaseDataError if none fits."""
    if name.lower().endswith(".csv") or not text.lstrip().startswith("{"):
        if looks_like_gpqa(text):
            return "gpqa-csv"
        if looks_like_mmlu_pro_csv(text):
            return "mmlu-pro-csv"
    else:
        obj = _first_object(text)
        if obj is not None:
            if any(k in obj for k in _OURS) or {"source", "id", "question"} <= set(obj):
                return "ds4"
            if looks_like_mmlu_pro(obj):
                return "mmlu-pro-jsonl"
            if looks_like_aime(obj):
                return "aime-jsonl"
    raise CaseDataError(
        f"{name}: cannot tell the case format (name it with --cases-format: {', '.join(READERS)})"
    )


def parse_case_file(name: str, text: str, fmt: str = AUTO) -> CaseSet:
    if not text.strip():
        raise CaseDataError(f"{name}: the file is empty")
    chosen = detect_format(name, text) if fmt == AUTO else fmt
    if chosen not in READERS:
        raise CaseDataError(f"unknown case format {fmt!r} (use {', '.join(FORMAT_NAMES)})")
    return READERS[chosen](text, name)


# --- sources ---
# The sources table: where the public data sets the readers understand come from and
# under what terms (docs/eval.md "Sources"). A case file can add rows of its own
# (`"record": "source"` lines); those win over these.

KNOWN_SOURCES: tuple[SourceInfo, ...] = (
    SourceInfo(
        "GPQA",
        "CC BY 4.0",
        "https://github.com/idavidrein/gpqa",
        "graduate-level physics, chemistry and biology; multiple choice with 4 choices",
    ),
    SourceInfo(
        "GPQA Diamond",
        "CC BY 4.0",
        "https://github.com/idavidrein/gpqa",
        "the GPQA subset most experts answer right and most non-experts wrong",
    ),
    SourceInfo(
        "SuperGPQA",
        "ODC-BY",
        "https://huggingface.co/datasets/m-a-p/SuperGPQA",
        "broad professional knowledge; multiple choice with up to 10 choices",
    ),
    SourceInfo(
        "AIME",
        "MIT (mirror)",
        "https://huggingface.co/datasets/opencompass/AIME2025",
        "American Invitational Mathematics Examination problems; integer answers 0..999",
    ),
    SourceInfo(
        "MMLU-Pro",
        "MIT",
        "https://huggingface.co/datasets/TIGER-Lab/MMLU-Pro",
        "multi-discipline multiple choice with up to 10 choices",
    ),
)


def source_table(declared: dict[str, SourceInfo]) -> dict[str, SourceInfo]:
    """The known rows, overridden and extended by a case set's own."""
    table = {info.name: info for info in KNOWN_SOURCES}
    table.update(declared)
    return table


# --- validation ---
# `ds4 eval --validate-cases`: every problem of the case files, not only the first
# (docs/eval.md "Case files").


@dataclass
class CaseValidationReport:
    lines: list[str] = field(default_factory=list)
    problems: int = 0


def _one_file(path: str, text: str, fmt: str, problems: list[str]) -> CaseSet:
    try:
        chosen = detect_format(path, text) if fmt == AUTO else fmt
        if chosen == "ds4":
            return parse_case_lines(text, path, problems)
        return parse_case_file(path, text, chosen)
    except CaseDataError as error:
        problems.append(str(error))
        return CaseSet()


def validation_report(files: Sequence[tuple[str, str]], fmt: str = AUTO) -> CaseValidationReport:
    problems: list[str] = []
    merged = CaseSet()
    counts = []
    for path, text in files:
        cases = _one_file(path, text, fmt, problems)
        counts.append(f"{path}: {len(cases.cases)} cases")
        for case in cases.cases:
            try:
                merged.add_case(case, cases.origins[case.key])
            except CaseDataError as error:
                problems.append(str(error))
        for info in cases.sources.values():
            merged.add_source(info)
    table = source_table(merged.sources)
    for source in sorted({c.source for c in merged.cases} - set(table)):
        problems.append(f"source {source!r} has no row in the sources table (licence and URL)")
    seen: dict[str, str] = {}
    for case in merged.cases:
        text = " ".join(case.question.split())
        first = seen.setdefault(text, f"{case.source}/{case.id}")
        if first != f"{case.source}/{case.id}":
            problems.append(f"{merged.origins[case.key]}: same question as {first}")
    report = CaseValidationReport(counts + problems, len(problems))
    if problems:
        report.lines.append(f"ds4-eval: {len(problems)} problems in {len(files)} case files")
    else:
        report.lines.append(f"ds4-eval: {len(merged.cases)} cases in {len(files)} files are valid")
    return report
