"""Several inference slots behind one FIFO queue (`ds4 server --sessions N`, ADR 0045).

Each slot is an InferenceWorker: one Worker (its own live session and bindings) on its
own thread, exactly what the server runs with one session. The pool keeps the jobs in
arrival order and hands the oldest to an idle slot: the one whose conversation the job
continues, else an empty one, else the one used least recently (serving.prepare.choose_slot).
A slot is busy from the hand-off until its job's last output (Finished or JobFailed);
then `on_idle(slot)` runs (the step gate stops waiting for it) and it can take the
next job. A job cancelled while it waits here is answered by the slot without running.

The choice runs on the pool's own thread, never on the event loop: scoring a slot runs
the cache decision, which may detokenize its whole live state. It reads idle slots
only, whose state nothing else touches meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace

from ds4.adapters.http.inference_worker import (
    SHUT_DOWN,
    InferenceWorker,
    Job,
    JobFailed,
    JobOutput,
    ShuttingDownError,
)
from ds4.domain.generation.events import Finished
from ds4.domain.serving.prepare import SlotCandidate, SlotLedger, choose_slot

log = logging.getLogger("ds4.server")


def _nothing(_slot: int) -> None:
    return None


class SlotPool:
    def __init__(
        self, slots: Sequence[InferenceWorker], *, on_idle: Callable[[int], None] = _nothing
    ) -> None:
        if not slots:
            raise ValueError("a slot pool needs at least one slot")
        self.slots = tuple(slots)
        self._on_idle = on_idle
        self._cond = threading.Condition()
        self._queue: deque[Job] = deque()
        self._busy: set[int] = set()
        self._ledger = SlotLedger(len(self.slots))
        self._stopping = False
        self._submitted = 0
        # the slot of each job handed off, latest last (a window: the server runs for days)
        self.served: deque[int] = deque(maxlen=1024)
        self._thread = threading.Thread(target=self._dispatch, name="ds4-slots", daemon=True)

    def start(self) -> None:
        for slot in self.slots:
            slot.start()
        self._thread.start()

    def submit(self, job: Job) -> None:
        with self._cond:
            if self._stopping:
                raise ShuttingDownError
            self._queue.append(job)
            self._submitted += 1
            self._cond.notify_all()

    @property
    def submitted(self) -> int:
        with self._cond:
            return self._submitted

    @property
    def waiting(self) -> int:
        with self._cond:
            queued = len(self._queue)
        return queued + sum(slot.waiting for slot in self.slots)

    @property
    def running(self) -> int:
        return sum(slot.running for slot in self.slots)

    @property
    def stopping(self) -> bool:
        with self._cond:
            return self._stopping

    def begin_stop(self) -> None:
        """Refuse new jobs, answer the queued ones, cancel the running ones (never
        blocks)."""
        with self._cond:
            self._stopping = True
            waiting = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        for job in waiting:
            job.deliver(SHUT_DOWN)
        for slot in self.slots:
            slot.begin_stop()

    def stop(self) -> None:
        """Stop and wait until every slot has saved its live session and ended."""
        self.begin_stop()
        if self._thread.is_alive():
            self._thread.join()
        for slot in self.slots:
            slot.stop()

    async def stop_async(self) -> None:
        """`stop` for the server's shutdown hook: each slot finishes its current chunk
        or token and saves, while the event loop keeps running (`abandon` ends it)."""
        self.begin_stop()
        await asyncio.gather(*(slot.stop_async() for slot in self.slots))

    def abandon(self) -> None:
        self.begin_stop()
        for slot in self.slots:
            slot.abandon()

    # ---- the dispatcher thread -------------------------------------------------

    def _dispatch(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not (
                    self._queue and len(self._busy) < len(self.slots)
                ):
                    self._cond.wait()
                if self._stopping:
                    return
                job = self._queue.popleft()
                idle = [
                    (i, self._ledger.last_used(i))
                    for i in range(len(self.slots))
                    if i not in self._busy
                ]
            # only this thread makes a slot busy, so the idle ones stay idle meanwhile
            slot = choose_slot([self._candidate(job, i, last) for i, last in idle])
            with self._cond:
                self._busy.add(slot)
                self.served.append(slot)
            self._hand_off(slot, job)

    def _candidate(self, job: Job, slot: int, last_used: int) -> SlotCandidate:
        """An idle slot as the choice sees it: its live tokens, what the job keeps."""
        worker = self.slots[slot].worker
        kept = 0
        if not job.cancel.is_set():  # a cancelled job is answered without running
            try:
                kept = worker.reusable(job.prepared)
            except Exception:  # a choice never fails a job; its own run will say why
                log.exception("scoring slot %d failed", slot)
        return SlotCandidate(slot, worker.session.pos, kept, last_used)

    def _hand_off(self, slot: int, job: Job) -> None:
        def deliver(output: JobOutput) -> None:
            job.deliver(output)
            if isinstance(output, (Finished, JobFailed)):  # a job's last output
                self._ended(slot)

        try:
            # the same job (its cancel flag, its per-token callback) reporting back here
            self.slots[slot].submit(replace(job, deliver=deliver))
        except ShuttingDownError:
            deliver(SHUT_DOWN)

    def _ended(self, slot: int) -> None:
        self._on_idle(slot)
        with self._cond:
            self._busy.discard(slot)
            self._ledger.ended(slot)
            self._cond.notify_all()
