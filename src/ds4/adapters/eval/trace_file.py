"""The --trace file: written as the run goes (flushed per record) under a temporary
name next to it, renamed into place when the run ends, so FILE is never half written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ds4.domain.errors import Ds4Error


class TraceFile:
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
