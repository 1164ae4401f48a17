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

    def begin_stop(self) -> None:
        """Refuse new jobs and cancel queued and running ones (never blocks)."""
        ...

    def stop(self, timeout: float = 10.0) -> None: ...

    @property
    def stopping(self) -> bool: ...
