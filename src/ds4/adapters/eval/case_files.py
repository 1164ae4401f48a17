"""Case files from disk: bounded reads, UTF-8, each through the reader its format needs."""

from __future__ import annotations

from collections.abc import Sequence

from ds4.adapters.files import read_limited
from ds4.domain.eval.case_schema import CaseDataError, CaseSet
from ds4.domain.eval.readers import AUTO, parse_case_file

MAX_CASE_FILE = 256 << 20  # a case file larger than this is surely not one


def read_text(path: str, what: str = "case file") -> str:
    try:
        data = read_limited(path, MAX_CASE_FILE)
    except OSError as error:
        reason = (error.strerror or str(error)).lower()
        raise CaseDataError(f"cannot read {what} {path}: {reason}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise CaseDataError(f"{what} {path} is not UTF-8 (byte {error.start})") from None


def read_case_files(paths: Sequence[str], fmt: str = AUTO) -> CaseSet:
    """Every file's cases in order (a source/id defined twice is an error)."""
    out = CaseSet()
    for path in paths:
        out.extend(parse_case_file(path, read_text(path), fmt))
    return out
