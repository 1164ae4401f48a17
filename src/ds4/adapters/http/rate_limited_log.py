"""A warning that repeats at most once per interval (a flood of the same event, such
as accept() failing every second, must not fill the log)."""

from __future__ import annotations

import logging
import time


class RateLimitedWarning:
    def __init__(self, logger: logging.Logger, interval_seconds: float = 60.0) -> None:
        self.logger = logger
        self.interval = interval_seconds
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def report(self, key: str, message: str) -> None:
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        self._last[key] = now
        repeats = self._suppressed.pop(key, 0)
        suffix = f" ({repeats} more since the last report)" if repeats else ""
        self.logger.warning("%s%s", message, suffix)
