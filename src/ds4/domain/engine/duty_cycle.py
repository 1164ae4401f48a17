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

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.forwarding_session import ForwardingSession
from ds4.domain.errors import Ds4Error
from ds4.ports.compute import ComputeSession
from ds4.ports.drafter import Drafter
from ds4.ports.time import Pacer

F32 = npt.NDArray[np.float32]
MIN_POWER, MAX_POWER = 1, 100


class DutyCycle:
    """Accounts busy and paused time since the share was set: each pause makes up what
    is owed, so a pause that overran (a coarse timer) is taken off the next ones."""

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


class PacedSession(ForwardingSession):
    """A ComputeSession that rests after every evaluation (everything else passes through)."""

    def __init__(self, inner: ComputeSession, cycle: DutyCycle) -> None:
        super().__init__(inner)
        self._cycle = cycle

    def prefill(
        self,
        tokens: Sequence[int],
        *,
        chunk: int = 0,
        progress: Callable[[int, int], None] | None = None,
        all_logits: bool = False,
    ) -> F32:
        mark = [self._cycle.start()]

        def paced(done: int, total: int) -> None:  # after each chunk
            self._cycle.rest(mark[0])
            if progress is not None:
                progress(done, total)
            mark[0] = self._cycle.start()

        return self._inner.prefill(tokens, chunk=chunk, progress=paced, all_logits=all_logits)

    def eval(self, token: int) -> F32:
        started = self._cycle.start()
        out = self._inner.eval(token)
        self._cycle.rest(started)
        return out

    def rewind(self, n: int) -> None:
        started = self._cycle.start()
        self._inner.rewind(n)
        self._cycle.rest(started)


class PacedDrafter:
    """A Drafter that rests after drafting (the MTP block's work counts too)."""

    def __init__(self, inner: Drafter, cycle: DutyCycle) -> None:
        self.inner = inner
        self._cycle = cycle

    def draft(self, token: int, limit: int) -> list[int]:
        started = self._cycle.start()
        out = self.inner.draft(token, limit)
        self._cycle.rest(started)
        return out

    def settle(self, proposed: int, accepted: int) -> None:
        self.inner.settle(proposed, accepted)
