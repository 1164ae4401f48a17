"""The one inference worker thread: it owns the engine and serves a FIFO queue; the
bounded job queue in front of it, and the turn large bodies take to be parsed.

Request handlers (on the event loop) submit prepared jobs and read the events back
through a callback; a job's cancel flag is checked by the generation loop at every
chunk and token boundary, also while the job still waits in the queue.

Stopping cancels the queued and running jobs; the thread then saves the live session
(Worker.shutdown) itself, so the save never races a job, and the server waits for it
before the process ends (ADR 0044: a busy worker at shutdown must not lose that save).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import anyio.to_thread

from ds4.domain.errors import ComputeUnavailableError, Ds4Error, ErrorKind, RequestError
from ds4.domain.generation.events import Finished, Usage
from ds4.domain.generation.loop import OnToken, ignore_token
from ds4.domain.serving.exchange import ServedEvent
from ds4.domain.serving.job import Worker
from ds4.domain.serving.prepare import PreparedJob

log = logging.getLogger("ds4.server")


SHUTTING_DOWN = "server shutting down"


@dataclass(frozen=True)
class JobFailed:
    """The job ended without a generation (refused, the prefill failed, shutdown);
    `message` is for the client and `kind` chooses the status. `refused`: the worker
    refused the request before any work (the live state it continues is gone), so it
    is answered with its own status while no byte of the reply went out."""

    message: str
    kind: ErrorKind = ErrorKind.INTERNAL
    refused: bool = False

    def error(self) -> RequestError:
        return RequestError(self.message, self.kind)


SHUT_DOWN = JobFailed(SHUTTING_DOWN, ErrorKind.UNAVAILABLE)


JobOutput = ServedEvent | JobFailed


@dataclass
class Job:
    prepared: PreparedJob
    deliver: Callable[[JobOutput], None]  # thread-safe; called from the worker thread
    cancel: threading.Event = field(default_factory=threading.Event)
    on_token: OnToken = ignore_token  # after each decoded token, on the worker thread


class ShuttingDownError(RequestError):
    """Submitted after shutdown began."""

    def __init__(self) -> None:
        super().__init__(SHUTTING_DOWN, ErrorKind.UNAVAILABLE)


class InferenceWorker:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._stopping = threading.Event()
        self._finished = threading.Event()  # the thread ended, the shutdown save done
        self._abandoned = threading.Event()  # a second signal: exit without waiting
        self._running: Job | None = None
        self._submitted = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name="ds4-inference", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, job: Job) -> None:
        with self._lock:
            if self._stopping.is_set():
                raise ShuttingDownError
            self._queue.put(job)
            self._submitted += 1

    @property
    def submitted(self) -> int:
        """Jobs accepted so far, in queue order (what a caller waits on to know that
        its job is queued before it sends the next one)."""
        with self._lock:
            return self._submitted

    @property
    def waiting(self) -> int:
        """Jobs queued and not yet started (the /metrics queue depth)."""
        with self._queue.mutex:
            return sum(job is not None for job in self._queue.queue)

    @property
    def running(self) -> int:
        """Jobs running on an engine session now (/metrics: active sessions)."""
        return 0 if self._running is None else 1

    def begin_stop(self) -> None:
        """Refuse new jobs and cancel queued and running ones (never blocks)."""
        with self._lock:
            if not self._stopping.is_set():
                self._stopping.set()
                self._queue.put(None)
        running = self._running
        if running is not None:
            running.cancel.set()

    def stop(self) -> None:
        """Stop and wait until the thread has saved the live session and ended."""
        self.begin_stop()
        if self._thread.is_alive():
            self._thread.join()

    async def stop_async(self) -> None:
        """`stop` for the server's shutdown hook: the event loop keeps running while
        the thread finishes its job's current chunk or token and saves, and a second
        signal (`abandon`) ends the wait at once."""
        self.begin_stop()
        if not self._thread.is_alive():
            return
        if self.worker.kv is not None:
            log.warning("stopping: saving the live session (a second Ctrl+C skips it)")
        while not self._finished.is_set() and not self._abandoned.is_set():
            await asyncio.sleep(0.05)

    def abandon(self) -> None:
        """Stop waiting for the shutdown save (the process is leaving without it)."""
        self.begin_stop()
        self._abandoned.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def _serve(self) -> None:
        try:
            self._serve_queue()
        finally:
            self._finished.set()

    def _serve_queue(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                break
            if self._stopping.is_set():
                job.cancel.set()
            self._running = job
            try:
                self._run(job)
            finally:
                self._running = None
        # drain: every job left gets an answer, never a hang
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job.deliver(SHUT_DOWN)
        try:
            # the disk KV cache keeps the live state (docs/reference/server.md §4.9)
            self.worker.shutdown()
        except Exception:
            log.exception("saving the live session at shutdown failed")

    def _run(self, job: Job) -> None:
        prompt = len(job.prepared.prompt_tokens)
        if job.cancel.is_set():
            job.deliver(Finished("cancelled", "", None, (), Usage(prompt, 0, 0)))
            return

        def cancelled() -> bool:
            return job.cancel.is_set() or self._stopping.is_set()

        try:
            for event in self.worker.run(job.prepared, cancel=cancelled, on_token=job.on_token):
                job.deliver(event)
        except RequestError as error:
            log.warning("job refused: %s", error.message)
            job.deliver(JobFailed(error.message, error.kind, refused=True))
        except ComputeUnavailableError as error:  # the backend recovers before the next job
            # answered with its 503 while no byte of the reply has gone out, as a refusal is
            log.warning("job failed: %s", error)
            job.deliver(JobFailed(str(error), ErrorKind.UNAVAILABLE, refused=True))
        except Ds4Error as error:
            log.warning("job failed before generation: %s", error)
            job.deliver(JobFailed(str(error)))
        except Exception as error:  # the worker must survive any one job
            log.exception("job crashed")
            self.worker.session.invalidate()
            job.deliver(JobFailed(f"internal error: {type(error).__name__}"))


# ---- the job queue ---------------------------------------------------------
# What the HTTP layer needs from whatever runs its jobs: one InferenceWorker, or a
# SlotPool of them with `--sessions N` (ADR 0045).


class JobQueue(Protocol):
    def start(self) -> None: ...

    def submit(self, job: Job) -> None:
        """Queue a job (ShuttingDownError once stopping began)."""
        ...

    @property
    def submitted(self) -> int:
        """Jobs accepted so far, in queue order."""
        ...

    @property
    def waiting(self) -> int:
        """Jobs queued and not yet started (the /metrics queue depth)."""
        ...

    @property
    def running(self) -> int:
        """Jobs running on an engine session now (/metrics: active sessions)."""
        ...

    def begin_stop(self) -> None:
        """Refuse new jobs and cancel queued and running ones (never blocks)."""
        ...

    def stop(self) -> None:
        """Stop and wait until every live session is saved and every thread ended."""
        ...

    async def stop_async(self) -> None:
        """`stop` for the server's shutdown hook (the event loop keeps running)."""
        ...

    def abandon(self) -> None:
        """Stop waiting for the shutdown saves (a second signal)."""
        ...

    @property
    def stopping(self) -> bool: ...


# ---- large bodies ----------------------------------------------------------
# Large request bodies go one at a time, on one thread of their own (ADR 0044).
#
# A body over LARGE_BODY_BYTES, or of unknown length (chunked), waits its turn before
# it is read; the others stay unread, held back by TCP flow control. So N large bodies
# cost one body's parsing memory, not N. Parsing and preparing them on one dedicated
# thread matters as much: glibc gives every thread its own malloc arena and keeps the
# freed memory of each, so four 60 MiB bodies parsed on four pool threads left the peak
# RSS at 850 MB where one thread stays at 310 MB.
#
# Agent requests stay far below the threshold: a whole 1M-token context is about 4 MiB
# of text.

T = TypeVar("T")

LARGE_BODY_BYTES = 8 << 20


def is_large(declared: str | None) -> bool:
    """By the request's Content-Length header (None: not sent)."""
    return declared is None or not declared.strip().isdigit() or int(declared) > LARGE_BODY_BYTES


class LargeBodies:
    def __init__(self) -> None:
        self._turn = asyncio.Lock()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="ds4-large-body")

    def turn(self, large: bool) -> AbstractAsyncContextManager[object]:
        """Held from reading a large body to its prepared job; nothing for a small one."""
        return self._turn if large else nullcontext()

    async def run(self, large: bool, work: Callable[..., T], *args: object) -> T:
        """`work(*args)` off the event loop: on the large-body thread, or the pool's."""
        if large:
            return await asyncio.get_running_loop().run_in_executor(self._thread, work, *args)
        return await anyio.to_thread.run_sync(work, *args)
