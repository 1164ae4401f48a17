"""The Clock port on the system's wall clock."""

from __future__ import annotations

import time


class SystemClock:
    def now(self) -> int:
        return int(time.time())
