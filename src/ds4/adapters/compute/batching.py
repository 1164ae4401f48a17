"""Several live sessions decoded as one batch: a step gate over ModelRunner.eval_batch.

With `ds4 server --sessions N` each slot runs its job on its own thread through the
ordinary blocking generation loop, over a `GatedSession`: its eval and prefill hand the
work to the shared `StepGate` and wait for the result. The gate runs a step as soon as
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
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.forwarding_session import ForwardingSession
from ds4.domain.errors import Ds4Error
from ds4.ports.compute import ComputeSession, ModelRunner

F32 = npt.NDArray[np.float32]

# How long a step waits for a slot that takes part but has not handed in its work. A
# decode step of every slot comes back within the time it takes to sample a token
# (a few ms of Python); anything much longer is a slot busy with something else.
DEFAULT_PATIENCE = 0.05


class _Work:
    """One slot's hand-in for one step: a decode token or a prefill chunk."""

    def __init__(self, slot: int, session: ComputeSession, tokens: list[int], decode: bool):
        self.slot = slot
        self.session = session
        self.tokens = tokens
        self.decode = decode
        self.result: F32 | None = None
        self.error: BaseException | None = None
        self.done = False

    def run_alone(self) -> None:
        """Evaluate through the session's own call (what one live session does)."""
        try:
            if self.decode:
                self.result = self.session.eval(self.tokens[0])
            else:
                self.result = self.session.prefill(self.tokens)
        except Exception as error:  # handed back to the slot's own thread
            self.error = error

    def outcome(self) -> F32:
        if self.error is not None:
            raise self.error
        if self.result is None:
            raise Ds4Error("the batched step ended without a result")
        return self.result


class StepGate:
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

    def session(self, inner: ComputeSession) -> GatedSession:
        """A new slot over `inner` (a session of this gate's runner)."""
        with self._cond:
            slot = self._slots
            self._slots += 1
        return GatedSession(self, slot, inner)

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

    def evaluate(
        self, slot: int, session: ComputeSession, tokens: Sequence[int], *, decode: bool
    ) -> F32:
        """Hand in one piece of work and wait for its step; the logits after it."""
        work = _Work(slot, session, list(tokens), decode)
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
        return work.outcome()

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
                work.run_alone()
            return
        try:
            results = self._runner.eval_batch(
                [work.session for work in batch], [work.tokens for work in batch]
            )
        except Exception:
            # a failed batch changes no session: each runs alone for its own outcome
            # (say one session's context is full; the others must not fail with it)
            for work in batch:
                work.run_alone()
            return
        for work, logits in zip(batch, results, strict=True):
            work.result = logits


class GatedSession(ForwardingSession):
    """A ComputeSession (the port) whose evaluations go through a StepGate; reading or
    replacing its own state passes through (only this slot's thread changes it)."""

    def __init__(self, gate: StepGate, slot: int, inner: ComputeSession) -> None:
        super().__init__(inner)
        self._gate = gate
        self._slot = slot

    @property
    def slot(self) -> int:
        return self._slot

    def eval(self, token: int) -> F32:
        return self._gate.evaluate(self._slot, self._inner, (token,), decode=True)

    def prefill(
        self,
        tokens: Sequence[int],
        *,
        chunk: int = 0,
        progress: Callable[[int, int], None] | None = None,
        all_logits: bool = False,
    ) -> F32:
        ids = list(tokens)
        if all_logits or not ids:  # not a server path: one pass on its own
            with self._gate.engine:
                return self._inner.prefill(
                    ids, chunk=chunk, progress=progress, all_logits=all_logits
                )
        held, total = len(self._inner.tokens), len(ids)
        if held + total > self.ctx:
            raise Ds4Error(f"{held + total} tokens do not fit the context of {self.ctx}")
        step = chunk if chunk > 0 else total
        logits = None
        for begin in range(0, total, step):
            piece = ids[begin : begin + step]
            logits = self._gate.evaluate(self._slot, self._inner, piece, decode=False)
            if progress is not None:
                progress(min(begin + step, total), total)
        assert logits is not None
        return logits

    def rewind(self, n: int) -> None:
        with self._gate.engine:  # it re-evaluates the last kept token
            self._inner.rewind(n)
