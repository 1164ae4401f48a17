"""Clock: wall time for code that must not read it itself (domain/)."""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    def now(self) -> int:
        """Unix seconds."""
        ...
