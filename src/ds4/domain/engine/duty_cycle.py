"""`--power PERCENT`: keep the engine busy about that share of the time by pausing after
each unit of work (docs/power-and-prefix.md).

A unit is one evaluation the session runs (a prefill chunk, a decode token, a verified
draft block, a rewind's re-evaluation) or one MTP draft; after a unit that took t
seconds the cycle pauses t·(100 − p)/p (less what earlier pauses overran), so
busy / (busy + pause) = p %. Output never
changes, only when it arrives. The percentage can change between units (`/power` in
the REPL).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ds4.domain.engine.session import Step
from ds4.domain.errors import Ds4Error
from ds4.ports.system import Pacer

T = TypeVar("T")
MIN_POWER, MAX_POWER = 1, 100


class DutyCycle:
    """A step policy (EngineSession's `policies`) that rests after every step; within a
    pass it rests after each chunk. It accounts busy and paused time since the share
    was set: each pause makes up what is owed, so a pause that overran (a coarse timer)
    is taken off the next ones."""

    def __init__(self, pacer: Pacer, percent: int = MAX_POWER) -> None:
        self._pacer = pacer
        self.percent = percent

    @property
    def percent(self) -> int:
        return self._percent

    @percent.setter
    def percent(self, value: int) -> None:
        if not MIN_POWER <= value <= MAX_POWER:
            raise Ds4Error(f"power {value} %: use {MIN_POWER}..{MAX_POWER}")
        self._percent = value
        self._busy = self._paused = 0.0

    @property
    def accounts(self) -> tuple[float, float]:
        """(busy, paused) seconds since the share was last set (100 %: not kept)."""
        return self._busy, self._paused

    def start(self) -> float:
        return self._pacer.monotonic()

    def rest(self, started: float) -> None:
        """Pause after a unit of work that began at `started` (a start() value)."""
        if self._percent >= MAX_POWER:
            return
        self._busy += max(0.0, self._pacer.monotonic() - started)
        owed = self._busy * (MAX_POWER - self._percent) / self._percent - self._paused
        if owed > 0:
            before = self._pacer.monotonic()
            self._pacer.sleep(owed)
            self._paused += self._pacer.monotonic() - before

    def around(self, step: Step, proceed: Callable[[Step], T]) -> T:
        if step.kind == "pass":  # it reports every chunk: rest after each of them
            return proceed(step.with_progress(self._paced(step.progress)))
        started = self.start()
        out = proceed(step)
        self.rest(started)
        return out

    def _paced(self, progress: Callable[[int, int], None] | None) -> Callable[[int, int], None]:
        mark = [self.start()]

        def paced(done: int, total: int) -> None:
            self.rest(mark[0])
            if progress is not None:
                progress(done, total)
            mark[0] = self.start()

        return paced
