"""Shared bits of the readers: CSV rows from text, field access with a clear error."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping

from ds4.domain.eval.case_schema import CaseDataError


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
