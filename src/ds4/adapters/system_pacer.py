"""The Pacer port on the system's monotonic clock and time.sleep."""

from __future__ import annotations

import time


class SystemPacer:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)
