"""--trace FILE: append-only, one record per line, each starting with the local time
(`YYYY-MM-DD HH:MM:SS.mmm `), written whole from any thread."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TextIO

from ds4.domain.errors import Ds4Error


class TraceFile:
    def __init__(self, path: str) -> None:
        try:
            self._file: TextIO = Path(path).open("a", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise Ds4Error(f"cannot open trace file {path}: {exc.strerror}") from None
        self._lock = threading.Lock()

    def write(self, line: str) -> None:
        now = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        millis = int(now * 1000) % 1000
        with self._lock:
            self._file.write(f"{stamp}.{millis:03d} {line}\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()
