"""The Timer port on the system's monotonic and wall clocks."""

from __future__ import annotations

import time


class SystemTimer:
    def elapsed(self) -> float:
        return time.monotonic()

    def unix(self) -> int:
        return int(time.time())
