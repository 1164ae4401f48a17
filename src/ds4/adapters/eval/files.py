"""ds4 eval's files: case files read in, the --trace file written out."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ds4.adapters.files import read_limited
from ds4.domain.errors import Ds4Error
from ds4.domain.eval.case_schema import CaseDataError, CaseSet
from ds4.domain.eval.readers import AUTO, parse_case_file

# --- Case files -----------------------------------------------------------------------
# Case files from disk: bounded reads, UTF-8, each through the reader its format needs.

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


# --- The trace file -------------------------------------------------------------------
# The --trace file: written as the run goes (flushed per record) under a temporary
# name next to it, renamed into place when the run ends, so FILE is never half written.


class EvalTraceFile:
    def __init__(self, path: str) -> None:
        self.path = Path(path)
        try:
            fd, tmp = tempfile.mkstemp(
                prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.absolute().parent
            )
        except OSError as error:
            raise Ds4Error(f"cannot open trace file {path}: {error.strerror}") from None
        self._tmp = Path(tmp)
        self._handle = os.fdopen(fd, "w", encoding="utf-8", newline="")

    def write(self, text: str) -> None:
        self._handle.write(text)
        self._handle.flush()

    def discard(self) -> None:
        """The run never started: leave nothing behind."""
        if not self._handle.closed:
            self._handle.close()
        self._tmp.unlink(missing_ok=True)

    def close(self) -> None:
        """Put what was written at the trace's path (also after an interrupted run)."""
        if self._handle.closed:
            return
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        self._tmp.chmod(0o644)
        self._tmp.replace(self.path)
