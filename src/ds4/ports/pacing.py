"""Pacer: a monotonic clock and a pause, for the duty cycle of `--power` (the domain
reads no clock and never sleeps itself)."""

from __future__ import annotations

from typing import Protocol


class Pacer(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    def sleep(self, seconds: float) -> None: ...
