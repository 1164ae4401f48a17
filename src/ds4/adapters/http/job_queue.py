"""What the HTTP layer needs from whatever runs its jobs: one InferenceWorker, or a
SlotPool of them with `--sessions N` (ADR 0045)."""

from __future__ import annotations

from typing import Protocol

from ds4.adapters.http.inference_worker import Job


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
