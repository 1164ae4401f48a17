"""Timer: elapsed seconds and wall time for code that must not read clocks itself."""

from __future__ import annotations

from typing import Protocol


class Timer(Protocol):
    def elapsed(self) -> float:
        """Seconds on a monotonic clock (differences only mean something)."""
        ...

    def unix(self) -> int:
        """Unix seconds (trace timestamps)."""
        ...
