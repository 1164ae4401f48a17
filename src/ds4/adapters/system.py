"""The system's clocks, pauses and entropy: the ports of ports/system.py (Clock, Timer,
Pacer, RandomSource) on the standard library."""

from __future__ import annotations

import secrets
import time


class SystemClock:
    """Clock, Timer and Pacer at once: wall and monotonic time and time.sleep."""

    def now(self) -> int:
        return int(time.time())

    def unix(self) -> int:
        return int(time.time())

    def elapsed(self) -> float:
        return time.monotonic()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class SystemRandom:
    """RandomSource on the operating system's CSPRNG."""

    def token_bytes(self, n: int) -> bytes:
        return secrets.token_bytes(n)
