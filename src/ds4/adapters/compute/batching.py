"""Several live sessions decoded as one batch: a step gate over ModelRunner.eval_batch.

With `ds4 server --sessions N` each slot runs its job on its own thread through the
ordinary blocking generation loop, over an engine session whose step policy is the
shared `StepGate` (domain/engine/session.py): its decode tokens and prefill chunks are
handed to the gate, which the slot's thread waits on for the result. The gate runs a step as soon as
every slot taking part has handed in its work: one `runner.eval_batch` over all of it
(a decode token, or a prefill chunk as a longer list), so the weights are read once per
step for every row and a prefill chunk shares its pass with the other slots' decode
tokens. eval_batch gives each session exactly what it would give alone, so how the work
is grouped never changes a result; it only decides how fast the steps go (ADR 0045).

Who is waited for: a slot, from `enter` or its first hand-in until `leave` (its job
ended). A slot busy elsewhere (a disk save, a client's turn being post-processed) is
waited for at most `patience` seconds after the first work came in (or after the
last step ended, for work that came in during it); then the step runs without it, and
it is not waited for again until it next hands in work. That bound keeps one slot from stalling
the others; nothing depends on it for correctness.

A rewind re-evaluates the last kept token, so it takes the gate's engine lock, as a
step does: the native forward keeps per-runner scratch buffers, so two forward calls
into one runner never overlap. Everything else a session does (rewind floors,
payloads, checkpoints, invalidate) touches only its own state, which no step uses
while its slot's thread is busy with it, so a slot saving a large payload to disk does
not hold up the others' steps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.session import Step
from ds4.domain.errors import Ds4Error
from ds4.ports.compute import ComputeSession, ModelRunner

F32 = npt.NDArray[np.float32]
T = TypeVar("T")

# How long a step waits for a slot that takes part but has not handed in its work. A
# decode step of every slot comes back within the time it takes to sample a token
# (a few ms of Python); anything much longer is a slot busy with something else.
DEFAULT_PATIENCE = 0.05


class _Work:
    """One slot's hand-in for one step: a decode token or a prefill chunk, and how to
    evaluate it alone (the rest of its session's policy chain)."""

    def __init__(self, slot: int, step: Step, alone: Callable[[Step], Any]):
        self.slot = slot
        self.step = step
        self.alone = alone
        self.result: F32 | None = None
        self.error: BaseException | None = None
        self.done = False


def _run_alone(work: _Work) -> None:
    """Evaluate through the session's own call (what one live session does)."""
    try:
        work.result = work.alone(work.step)
    except Exception as error:  # handed back to the slot's own thread
        work.error = error


def _outcome(work: _Work) -> F32:
    if work.error is not None:
        raise work.error
    if work.result is None:
        raise Ds4Error("the batched step ended without a result")
    return work.result


class StepGate:
    """A step policy shared by every slot's engine session (`policies=(gate,)`)."""

    def __init__(
        self,
        runner: ModelRunner,
        *,
        patience: float | None = DEFAULT_PATIENCE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`patience`: seconds a step waits for a slot that takes part (None: for ever,
        which only tests that drive every slot themselves should use)."""
        self._runner = runner
        self._patience = patience
        self._clock = clock
        self.engine = threading.Lock()  # every forward call: the steps, rewinds
        self._cond = threading.Condition()
        self._slots = 0
        self._present: set[int] = set()  # slots a step waits for
        self._pending: dict[int, _Work] = {}  # slot -> its work for the next step
        self._since: float | None = None  # when the oldest pending work came in
        self._stepping = False
        self.steps = 0  # steps run
        self.rows = 0  # slot hand-ins evaluated (rows / steps: sessions per step)
        self.missed = 0  # times a step stopped waiting for a slot (patience ran out)
        self._slot_of: dict[int, int] = {}  # id(compute session) -> its slot
        self._computes: list[ComputeSession] = []  # keeps those ids taken

    def add(self, compute: ComputeSession) -> int:
        """A new slot over `compute` (a session of this gate's runner): its number."""
        with self._cond:
            slot = self._slots
            self._slots += 1
            self._slot_of[id(compute)] = slot
            self._computes.append(compute)
        return slot

    def slot(self, compute: ComputeSession) -> int:
        return self._slot_of[id(compute)]

    def around(self, step: Step, proceed: Callable[[Step], T]) -> T:
        """Decode tokens and prefill chunks wait for the next batched step; a rewind or
        a whole pass takes the engine lock (a forward call of its own); a draft runs on
        the drafter's own state."""
        if step.kind in ("decode", "chunk") and step.tokens:
            return cast(T, self.evaluate(self.slot(step.compute), step, proceed))
        if step.kind == "draft":
            return proceed(step)
        with self.engine:  # a rewind re-evaluates the last kept token
            return proceed(step)

    @property
    def pending(self) -> int:
        """Slots whose work waits for the next step."""
        with self._cond:
            return len(self._pending)

    def enter(self, slot: int) -> None:
        """From now on steps wait for this slot's work (a hand-in does the same)."""
        with self._cond:
            self._present.add(slot)

    def leave(self, slot: int) -> None:
        """The slot hands in nothing more for now: steps stop waiting for it."""
        with self._cond:
            self._present.discard(slot)
            self._cond.notify_all()

    def evaluate(self, slot: int, step: Step, alone: Callable[[Step], Any]) -> F32:
        """Hand in one piece of work and wait for its step; the logits after it."""
        work = _Work(slot, step, alone)
        with self._cond:
            if slot in self._pending:
                raise Ds4Error(f"slot {slot} handed in work twice for one step")
            self._pending[slot] = work
            self._present.add(slot)
            if self._since is None:
                self._since = self._clock()
            self._cond.notify_all()  # a waiting slot may now see the step complete
            batch = self._await(work)
        if batch is not None:
            self._run(batch)
        return _outcome(work)

    # ---- the step ------------------------------------------------------------

    def _await(self, work: _Work) -> list[_Work] | None:
        """Under the lock: wait until `work` is done (None) or this thread is the one
        to run the next step, which then includes `work` (the batch)."""
        while not work.done:
            complete = self._present <= set(self._pending) or self._waited_enough()
            if complete and not self._stepping:
                return self._take()
            self._cond.wait(self._wait_time())
        return None

    def _waited_enough(self) -> bool:
        if self._patience is None or self._since is None:
            return False
        return self._clock() - self._since >= self._patience

    def _wait_time(self) -> float | None:
        if self._stepping or self._patience is None or self._since is None:
            return None  # woken when the step ends or work comes in
        return max(0.0, self._since + self._patience - self._clock())

    def _take(self) -> list[_Work]:
        # slots that did not hand in work in time are not waited for until they do
        handed_in = set(self._pending)
        self.missed += len(self._present - handed_in)
        self._present &= handed_in
        batch = list(self._pending.values())
        self._pending.clear()
        self._since = None
        self._stepping = True
        return batch

    def _run(self, batch: list[_Work]) -> None:
        try:
            with self.engine:
                self._evaluate(batch)
        finally:
            with self._cond:
                for work in batch:
                    work.done = True
                self._stepping = False
                if self._pending:
                    # work handed in during the step waits from now on: the slots of
                    # this step only now get their results to work on
                    self._since = self._clock()
                self.steps += 1
                self.rows += len(batch)
                self._cond.notify_all()

    def _evaluate(self, batch: list[_Work]) -> None:
        if len(batch) == 1 or not self._runner.batches_in_one_pass:
            for work in batch:
                _run_alone(work)
            return
        try:
            results = self._runner.eval_batch(
                [work.step.compute for work in batch], [list(work.step.tokens) for work in batch]
            )
        except Exception:
            # a failed batch changes no session: each runs alone for its own outcome
            # (say one session's context is full; the others must not fail with it)
            for work in batch:
                _run_alone(work)
            return
        for work, logits in zip(batch, results, strict=True):
            work.result = logits
