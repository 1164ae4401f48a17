"""Time for code that must not read a clock or sleep itself (domain/, the HTTP layer's
reply stamps): wall seconds (`Clock`), elapsed seconds (`Timer`) and the monotonic clock
and pause of the `--power` duty cycle (`Pacer`). adapters/system.py serves all three."""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    def now(self) -> int:
        """Unix seconds."""
        ...


class Timer(Protocol):
    def elapsed(self) -> float:
        """Seconds on a monotonic clock (differences only mean something)."""
        ...

    def unix(self) -> int:
        """Unix seconds (trace timestamps)."""
        ...


class Pacer(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    def sleep(self, seconds: float) -> None: ...
