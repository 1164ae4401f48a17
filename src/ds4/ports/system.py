"""What code that must not touch the system itself (domain/, the HTTP layer's reply
stamps and ids) takes from it through ports: wall seconds (`Clock`), elapsed seconds
(`Timer`), the monotonic clock and pause of the `--power` duty cycle (`Pacer`), and
unguessable bytes (`RandomSource`: a CSPRNG in production, a fixed script in tests).
adapters/system.py serves all four."""

from __future__ import annotations

from typing import Protocol

from ds4.domain.memory import MemoryLimits


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


class RandomSource(Protocol):
    def token_bytes(self, n: int) -> bytes:
        """`n` unpredictable bytes."""
        ...


class MemoryRoom(Protocol):
    def limits(self) -> MemoryLimits:
        """What each source (MemAvailable, the memory cgroup, RLIMIT_AS) allows now."""
        ...
