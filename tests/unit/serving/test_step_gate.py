"""The step gate of --sessions N (adapters/compute/batching.py) over a fake runner that
batches: every step runs one eval_batch over the work of every slot taking part, a
prefill chunk shares its step with other slots' decode tokens, a slot that left or
hands in nothing is not waited for, a failing row fails only its own slot, and every
slot gets what its session gives alone.

Slots are threads here, as in the server. Steps only wait for slots that entered, and
with `patience=None` for ever, so which work shares a step is fixed by the test, not
by timing."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import pytest
from tests.support.fake_compute import FakeComputeSession, FakeRunner

from ds4.adapters.compute.batching import StepGate
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.ports.compute import ComputeSession

F32 = npt.NDArray[np.float32]


class BatchingRunner(FakeRunner):
    """A runner that says it batches: eval_batch records each batch (every session's
    token count) and, like a real one, changes no session when one row fails."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[int]] = []
        self.hold: threading.Event | None = None  # the next batch waits for it
        self.holding = threading.Event()  # set while a batch waits

    @property
    def batches_in_one_pass(self) -> bool:
        return True

    def eval_batch(
        self, sessions: Sequence[ComputeSession], tokens: Sequence[Sequence[int]]
    ) -> list[F32]:
        hold, self.hold = self.hold, None
        if hold is not None:
            self.holding.set()
            assert hold.wait(30)
        fakes = [s for s in sessions if isinstance(s, FakeComputeSession)]
        before = [s.checkpoint() for s in fakes]
        try:
            out = [s.prefill(list(ids)) for s, ids in zip(fakes, tokens, strict=True)]
        except Ds4Error:
            for s, cp in zip(fakes, before, strict=True):
                s.restore(cp)
            raise
        self.batches.append([len(ids) for ids in tokens])
        return out


class Slot:
    """A slot of the gate: its number and the engine session the gate batches."""

    def __init__(self, gate: StepGate, compute: ComputeSession, chunk: int = 0) -> None:
        self.slot = gate.add(compute)
        self.session = EngineSession(compute, chunk=chunk, policies=(gate,))

    def prefill(self, prompt: list[int]) -> F32:
        list(self.session.extend(prompt))
        return self.session.logits()


def slots(n: int, runner: FakeRunner, gate: StepGate, ctx: int = 64) -> list[Slot]:
    sessions = [Slot(gate, runner.new_session(ctx)) for _ in range(n)]
    for s in sessions:
        gate.enter(s.slot)
    return sessions


def run_threads(*jobs: Callable[[], None]) -> None:
    errors: list[BaseException] = []

    def guarded(job: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                job()
            except BaseException as error:  # reported by the test, not lost in a thread
                errors.append(error)

        return run

    threads = [threading.Thread(target=guarded(job)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a slot thread hung"
    if errors:
        raise errors[0]


def greedy(
    gate: StepGate, session: Slot, prompt: list[int], steps: int, out: list[F32]
) -> Callable[[], None]:
    """A slot's job: prefill, then `steps` greedy decode tokens; then it leaves."""

    def job() -> None:
        logits = session.prefill(prompt)
        out.append(logits.copy())
        for _ in range(steps):
            logits = session.session.eval(int(np.argmax(logits)))
            out.append(logits.copy())
        gate.leave(session.slot)

    return job


def alone(prompt: list[int], steps: int) -> list[F32]:
    session = FakeRunner().new_session(64)
    logits = session.prefill(prompt)
    out = [logits.copy()]
    for _ in range(steps):
        logits = session.eval(int(np.argmax(logits)))
        out.append(logits.copy())
    return out


PROMPTS = [[1, 2, 3], [7, 8], [4, 4, 4, 4, 5]]


def test_every_step_batches_every_slot_and_each_gets_what_it_gets_alone() -> None:
    runner = BatchingRunner()
    gate = StepGate(runner, patience=None)
    sessions = slots(3, runner, gate)
    outs: list[list[F32]] = [[], [], []]
    jobs = zip(sessions, PROMPTS, outs, strict=True)
    run_threads(*(greedy(gate, s, p, 10, o) for s, p, o in jobs))
    assert runner.batches == [[len(p) for p in PROMPTS]] + [[1, 1, 1]] * 10
    assert (gate.steps, gate.rows, gate.missed) == (11, 33, 0)
    for prompt, out in zip(PROMPTS, outs, strict=True):
        assert all(np.array_equal(a, b) for a, b in zip(out, alone(prompt, 10), strict=True))


def test_a_slot_that_leaves_no_longer_holds_the_others() -> None:
    runner = BatchingRunner()
    gate = StepGate(runner, patience=None)
    sessions = slots(3, runner, gate)
    outs: list[list[F32]] = [[], [], []]
    steps = [10, 3, 10]  # slot 1 is cancelled after three tokens: its job ends
    jobs = zip(sessions, PROMPTS, steps, outs, strict=True)
    run_threads(*(greedy(gate, s, p, k, o) for s, p, k, o in jobs))
    assert [len(b) for b in runner.batches] == [3] * 4 + [2] * 7
    for prompt, k, out in zip(PROMPTS, steps, outs, strict=True):
        assert all(np.array_equal(a, b) for a, b in zip(out, alone(prompt, k), strict=True))


def test_prefill_chunks_share_their_steps_with_another_slots_decode() -> None:
    runner = BatchingRunner()
    gate = StepGate(runner, patience=None)
    decoding, prefilling = (Slot(gate, runner.new_session(64), chunk=4) for _ in range(2))
    decoding.prefill([5, 6])  # alone: nobody else takes part yet
    for s in (decoding, prefilling):
        gate.enter(s.slot)
    runner.batches.clear()
    long_prompt = list(range(20))

    def decode() -> None:
        logits = decoding.session.logits()
        for _ in range(5):
            logits = decoding.session.eval(int(np.argmax(logits)))
        gate.leave(decoding.slot)

    def prefill() -> None:
        prefilling.prefill(long_prompt)  # in chunks of 4
        gate.leave(prefilling.slot)

    run_threads(decode, prefill)
    assert sorted(map(sorted, runner.batches)) == [[1, 4]] * 5
    assert list(prefilling.session.tokens) == long_prompt
    assert np.array_equal(prefilling.session.logits(), alone(long_prompt, 0)[0])


def test_a_failing_row_fails_only_its_own_slot() -> None:
    runner = BatchingRunner()
    gate = StepGate(runner, patience=None)
    good = Slot(gate, runner.new_session(64))
    failing = Slot(gate, FakeComputeSession(ctx=64, fail_after=3))
    for s in (good, failing):
        gate.enter(s.slot)
    outcome: dict[str, object] = {}

    def run_good() -> None:
        outcome["good"] = good.prefill([1, 2, 3, 4]).copy()
        gate.leave(good.slot)

    def run_failing() -> None:
        try:
            failing.prefill([1, 2, 3, 4])
        except Ds4Error as error:
            outcome["failing"] = error
        gate.leave(failing.slot)

    run_threads(run_good, run_failing)
    assert runner.batches == []  # the batch failed; each row then ran alone
    assert np.array_equal(np.asarray(outcome["good"]), alone([1, 2, 3, 4], 0)[0])
    assert isinstance(outcome["failing"], Ds4Error)
    assert list(failing.session.tokens) == [1, 2, 3]  # as far as the fake engine got alone


def test_a_slot_that_hands_in_nothing_is_waited_for_only_so_long() -> None:
    """Slot 1 takes part (entered) but stays busy elsewhere: after `patience` a step
    runs without it, and later steps do not wait for it at all."""
    runner = BatchingRunner()
    gate = StepGate(runner, patience=0.01)
    busy_elsewhere, working = slots(2, runner, gate)
    out: list[F32] = []
    run_threads(greedy(gate, working, [1, 2], 4, out))
    assert all(np.array_equal(a, b) for a, b in zip(out, alone([1, 2], 4), strict=True))
    assert (gate.steps, gate.rows, gate.missed) == (5, 5, 1)  # waited for it once
    assert list(busy_elsewhere.session.tokens) == []


def test_a_prompt_beyond_the_context_fails_before_any_chunk() -> None:
    runner = BatchingRunner()
    gate = StepGate(runner, patience=None)
    compute = runner.new_session(8)
    gate.enter(gate.add(compute))
    session = EngineSession(compute, chunk=2, policies=(gate,))
    with pytest.raises(Ds4Error, match="do not fit the context of 8"):
        list(session.extend(list(range(9))))
    assert list(session.tokens) == [] and gate.steps == 0


def test_a_runner_that_does_not_batch_sees_each_sessions_own_calls() -> None:
    """The scripted double tells decode from prefill by the call it gets: without a
    one-pass batch, decode tokens go to eval and chunks to prefill, also in one step."""
    runner = FakeRunner()  # batches_in_one_pass is False
    gate = StepGate(runner, patience=None)
    a, b = slots(2, runner, gate)
    run_threads(greedy(gate, a, [1, 2, 3], 3, []), greedy(gate, b, [4, 5], 3, []))
    fa, fb = runner.sessions
    assert fa.prefill_calls == [3] and fb.prefill_calls == [2]  # decode went through eval
    assert (gate.steps, gate.rows) == (4, 8)


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_work_handed_in_during_a_long_step_waits_for_that_steps_slots() -> None:
    """A step took longer than the patience (a big model); a slot that handed in
    meanwhile must not run alone once it ends: the slots of that step get their results
    only then, and the next step takes all three."""
    runner, clock = BatchingRunner(), ManualClock()
    gate = StepGate(runner, patience=1.0, clock=clock)
    a, b = slots(2, runner, gate)
    newcomer = Slot(gate, runner.new_session(64))
    runner.hold = threading.Event()
    released = runner.hold

    def late() -> None:
        assert runner.holding.wait(30)  # the first step of a and b is running
        greedy(gate, newcomer, [9, 9, 9], 2, [])()

    def advance_then_release() -> None:
        assert runner.holding.wait(30)
        while gate.pending < 1:  # the newcomer's prefill waits for the next step
            threading.Event().wait(0.001)
        clock.now += 5.0  # the step took five times the patience
        released.set()

    run_threads(
        greedy(gate, a, [1, 2], 3, []),
        greedy(gate, b, [3, 4], 3, []),
        late,
        advance_then_release,
    )
    assert runner.batches[0] == [2, 2] and sorted(runner.batches[1]) == [1, 1, 3]
    assert gate.missed == 0
