"""--power: after each unit of work (an evaluation, a prefill chunk, a draft) the pause is
busy·(100 − p)/p, so the engine computes p % of the time; 100 never pauses."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from tests.support.fake_compute import FakeComputeSession

from ds4.domain.engine.duty_cycle import DutyCycle
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error


class FakePacer:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class TimedSession(FakeComputeSession):
    """Every evaluated token takes one second on the pacer's clock."""

    def __init__(self, pacer: FakePacer) -> None:
        super().__init__(vocab=50, ctx=64)
        self.pacer = pacer

    def _append(self, token: int) -> npt.NDArray[np.float32]:
        self.pacer.now += 1.0
        return super()._append(token)


def paced(pacer: FakePacer, cycle: DutyCycle, chunk: int = 0) -> EngineSession:
    return EngineSession(TimedSession(pacer), chunk=chunk, policies=(cycle,))


def test_each_evaluation_and_each_chunk_is_followed_by_its_pause() -> None:
    pacer = FakePacer()
    session = paced(pacer, DutyCycle(pacer, 25), chunk=4)
    list(session.extend([1, 2, 3, 4, 5, 6]))  # chunks of 4 and 2 tokens
    session.eval(7)
    list(session.extend([8, 9]))  # one unit
    assert pacer.sleeps == [12.0, 6.0, 3.0, 6.0]  # busy * 75 / 25
    busy = 6 + 1 + 2
    assert busy / pacer.now == pytest.approx(0.25)
    assert list(session.tokens) == list(range(1, 10))


def test_full_power_never_pauses_and_the_share_can_change() -> None:
    pacer = FakePacer()
    cycle = DutyCycle(pacer)
    session = paced(pacer, cycle)
    list(session.extend([1, 2, 3]))
    assert pacer.sleeps == []
    cycle.percent = 50
    session.eval(4)
    assert pacer.sleeps == [1.0]
    for bad in (0, 101):
        with pytest.raises(Ds4Error, match=r"use 1\.\.100"):
            cycle.percent = bad


def test_progress_still_reaches_the_caller_and_drafting_is_paced() -> None:
    pacer = FakePacer()
    cycle = DutyCycle(pacer, 50)
    seen: list[tuple[int, int]] = []
    seen.extend(paced(pacer, cycle, chunk=2).extend([1, 2, 3]))
    assert seen == [(2, 3), (3, 3)]

    class SlowDrafter:
        def draft(self, token: int, limit: int) -> list[int]:
            pacer.now += 0.5
            return [token] * limit

        def settle(self, proposed: int, accepted: int) -> None:
            pass

    pacer.sleeps.clear()
    drafting = EngineSession(TimedSession(pacer), drafter=SlowDrafter(), draft=2, policies=(cycle,))
    assert drafting.draft(3, 2) == [3, 3]
    assert pacer.sleeps == [0.5]


def test_a_pause_that_overran_is_taken_off_the_next_ones() -> None:
    class CoarsePacer(FakePacer):
        def sleep(self, seconds: float) -> None:
            super().sleep(seconds)
            self.now += 4.0  # the timer wakes late

    pacer = CoarsePacer()
    session = paced(pacer, DutyCycle(pacer, 50))
    for token in range(1, 9):
        session.eval(token)
    # the first pause takes 5 s for the 1 s owed: nothing more is owed until 6 s busy
    assert pacer.sleeps == [1.0, 1.0]
    assert 8.0 / pacer.now == pytest.approx(8 / 18)  # not 8 / (8 + 8 * 5)
