"""Our case file format (docs/eval.md "Case files"): JSON Lines, one object per line.

A line is a case (`"record": "case"`, the default) or a row of the sources table
(`"record": "source"`). Unknown fields are refused, so a misspelt field is an error
rather than a silently ignored one. Every problem names the file and line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ds4.domain.errors import Ds4Error
from ds4.domain.eval.cases import (
    ALL_SUITES,
    CHOICE_LETTERS,
    DEFAULT_SUITE,
    MAX_CASE_TOKENS,
    MAX_CHOICES,
    AnswerKind,
    EvalCase,
    SourceInfo,
    inferred_kind,
)
from ds4.domain.eval.grading import is_line_spec, sequence_items

CASE_FIELDS = frozenset(
    {
        "record", "source", "id", "domain", "title", "question", "choices", "answer",
        "answer_kind", "aliases", "max_tokens", "suites",
    }
)  # fmt: skip
SOURCE_FIELDS = frozenset({"record", "name", "license", "url", "note"})
_SUITE_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
_INTEGER = re.compile(r"[0-9]+")


class CaseDataError(Ds4Error):
    """A case file that cannot be used (exit 2, like a bad flag)."""


@dataclass
class CaseSet:
    """Cases in file order and the sources table, as read from one or more files."""

    cases: list[EvalCase] = field(default_factory=list)
    sources: dict[str, SourceInfo] = field(default_factory=dict)
    origins: dict[tuple[str, str], str] = field(default_factory=dict)  # key -> file:line
    by_key: dict[tuple[str, str], EvalCase] = field(default_factory=dict)

    def add_case(self, case: EvalCase, where: str) -> None:
        first = self.origins.get(case.key)
        if first is not None:
            raise CaseDataError(
                f"{where}: case {case.source}/{case.id} is already defined at {first}"
            )
        self.origins[case.key] = where
        self.by_key[case.key] = case
        self.cases.append(case)

    def add_source(self, info: SourceInfo) -> None:
        self.sources.setdefault(info.name, info)

    def extend(self, other: CaseSet) -> None:
        for case in other.cases:
            self.add_case(case, other.origins[case.key])
        for info in other.sources.values():
            self.add_source(info)

    def find(self, source: str, case_id: str) -> EvalCase | None:
        return self.by_key.get((source, case_id))


def _text(obj: Mapping[str, object], name: str, *, required: bool = True) -> str:
    value = obj.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValueError(f"{name!r} must be a non-empty string")
    return value


def _label(obj: Mapping[str, object], name: str) -> str:
    """A one-line name (source, id): what traces and reports print after a slash."""
    value = _text(obj, name)
    if value != value.strip() or "\n" in value or "\r" in value:
        raise ValueError(f"{name!r} must be one line without surrounding blanks")
    return value


def _string_list(obj: Mapping[str, object], name: str) -> tuple[str, ...]:
    value = obj.get(name)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{name!r} must be a list of non-empty strings")
    return tuple(value)


def _answer(obj: Mapping[str, object]) -> str:
    value = obj.get("answer")
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError("'answer' must be a string (or an integer)")
    text = str(value).strip()
    if not text:
        raise ValueError("'answer' must not be empty")
    return text


def _kind(obj: Mapping[str, object], source: str, choices: tuple[str, ...]) -> AnswerKind:
    value = obj.get("answer_kind")
    if value is None:
        return inferred_kind(source, choices)
    names = ", ".join(k.value for k in AnswerKind)
    if not isinstance(value, str) or value not in AnswerKind.__members__:
        raise ValueError(f"'answer_kind' must be one of {names}")
    return AnswerKind[value]


def _max_tokens(obj: Mapping[str, object]) -> int | None:
    value = obj.get("max_tokens")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CASE_TOKENS:
        raise ValueError(f"'max_tokens' must be an integer in 1..{MAX_CASE_TOKENS}")
    return value


def _suites(obj: Mapping[str, object]) -> frozenset[str]:
    names = _string_list(obj, "suites") if "suites" in obj else (DEFAULT_SUITE,)
    if not names:
        raise ValueError("'suites' must name at least one suite")
    for name in names:
        if not _SUITE_NAME.fullmatch(name) or name == ALL_SUITES:
            raise ValueError(
                f"suite name {name!r}: use lowercase letters, digits and '-' ('all' is "
                "reserved: it selects every case)"
            )
    return frozenset(names)


def answer_problem(kind: AnswerKind, answer: str, n_choices: int) -> str | None:
    """Why `answer` cannot be a key of this kind, or None."""
    if kind is AnswerKind.MULTIPLE_CHOICE:
        letters = CHOICE_LETTERS[:n_choices]
        if len(answer) != 1 or answer.upper() not in letters:
            return f"answer {answer!r} is not one of the choice letters {letters}"
    elif kind is AnswerKind.INTEGER:
        if not _INTEGER.fullmatch(answer):
            return f"answer {answer!r} is not a non-negative decimal integer"
    elif kind is AnswerKind.LINE_SET:
        if not is_line_spec(answer):
            return f"answer {answer!r} is not a line spec such as 11, 17-20 or 3,13-15"
    elif not sequence_items(answer, answer):
        return f"answer {answer!r} is not a comma-separated sequence"
    return None


def case_problems(case: EvalCase) -> list[str]:
    """Everything wrong with one case (empty when it can be run and graded)."""
    out = []
    n = len(case.choices)
    if case.answer_kind is AnswerKind.MULTIPLE_CHOICE and not 2 <= n <= MAX_CHOICES:
        out.append(f"a multiple-choice case needs 2..{MAX_CHOICES} choices (has {n})")
    if case.answer_kind is not AnswerKind.MULTIPLE_CHOICE and n:
        out.append(f"a {case.answer_kind.value} case has no choices (has {n})")
    for key in (case.answer, *case.aliases):
        problem = answer_problem(case.answer_kind, key, n)
        if problem is not None:
            out.append(problem if key == case.answer else "alias: " + problem)
    return out


def parse_case(obj: Mapping[str, object]) -> EvalCase:
    """One case object (ValueError naming the first problem)."""
    unknown = sorted(set(obj) - CASE_FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}")
    source = _label(obj, "source")
    choices = _string_list(obj, "choices")
    case = EvalCase(
        source=source,
        id=_label(obj, "id"),
        question=_text(obj, "question"),
        answer=_answer(obj),
        answer_kind=_kind(obj, source, choices),
        domain=_text(obj, "domain", required=False),
        title=_text(obj, "title", required=False),
        choices=choices,
        aliases=tuple(a.strip() for a in _string_list(obj, "aliases")),
        max_tokens=_max_tokens(obj),
        suites=_suites(obj),
    )
    problems = case_problems(case)
    if problems:
        raise ValueError(problems[0])
    return case


def parse_source(obj: Mapping[str, object]) -> SourceInfo:
    unknown = sorted(set(obj) - SOURCE_FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}")
    return SourceInfo(
        name=_label(obj, "name"),
        license=_text(obj, "license"),
        url=_text(obj, "url"),
        note=_text(obj, "note", required=False),
    )


def json_lines(
    text: str, origin: str, problems: list[str] | None = None
) -> Iterable[tuple[str, dict[str, object]]]:
    """(file:line, object) for every non-blank line of a JSON Lines text; a bad line
    raises CaseDataError, or with `problems` is noted there and skipped."""
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{origin}:{number}"
        try:
            obj = json.loads(line)
        except ValueError as error:
            _problem(problems, f"{where}: not JSON ({error})")
            continue
        if not isinstance(obj, dict):
            _problem(problems, f"{where}: expected a JSON object")
            continue
        yield where, obj


def _problem(problems: list[str] | None, message: str) -> None:
    if problems is None:
        raise CaseDataError(message)
    problems.append(message)


def parse_case_lines(text: str, origin: str, problems: list[str] | None = None) -> CaseSet:
    """Our JSONL case file. With `problems`, every bad line is listed there (and left
    out) instead of the first one raising."""
    out = CaseSet()
    for where, obj in json_lines(text, origin, problems):
        record = obj.get("record", "case")
        try:
            if record == "case":
                out.add_case(parse_case(obj), where)
            elif record == "source":
                out.add_source(parse_source(obj))
            else:
                raise ValueError(f'\'record\' must be "case" or "source", not {record!r}')
        except ValueError as error:
            _problem(problems, f"{where}: {error}")
        except CaseDataError as error:
            _problem(problems, str(error))
    return out


def case_object(case: EvalCase) -> dict[str, object]:
    """A case as a line of our format (what the readers' conversions write)."""
    obj: dict[str, object] = {"source": case.source, "id": case.id}
    if case.domain:
        obj["domain"] = case.domain
    if case.title:
        obj["title"] = case.title
    obj["question"] = case.question
    if case.choices:
        obj["choices"] = list(case.choices)
    obj["answer"] = case.answer
    obj["answer_kind"] = case.answer_kind.value
    if case.aliases:
        obj["aliases"] = list(case.aliases)
    if case.max_tokens is not None:
        obj["max_tokens"] = case.max_tokens
    obj["suites"] = sorted(case.suites)
    return obj
