"""The Shell port: commands as background jobs of `/bin/sh -c`.

Each job runs in its own process group (so a stop or a timeout reaches everything it
started) with stdin from /dev/null; a reader thread copies its merged stdout+stderr to
a private temp file (`ds4_agent_output_*`, kept after the job ends: the model may read
it) and counts bytes and lines as they come. A timer kills the group at the timeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ds4.domain.agent.tool_catalog import ToolError
from ds4.domain.engine.cancel import CancelCheck
from ds4.ports.agent import JobSnapshot

POLL_SECONDS = 0.05
STOP_GRACE = 1.0  # SIGTERM first, SIGKILL this long after


@dataclass
class _Job:
    job: int
    proc: subprocess.Popen[bytes]
    output_path: str
    timeout_sec: int
    started: float
    ended: float | None = None
    timed_out: bool = False
    output_bytes: int = 0
    newlines: int = 0
    last_byte: int = -1
    reader: threading.Thread | None = None
    timer: threading.Timer | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def _exit_status(code: int | None) -> int:
    if code is None:
        return -1
    return code if code >= 0 else 128 - code


class LocalShell:
    def __init__(self, cwd: str) -> None:
        self._cwd = cwd
        self._jobs: dict[int, _Job] = {}
        self._next = 1
        self._lock = threading.Lock()

    def start(self, command: str, timeout_sec: int) -> JobSnapshot:
        fd, path = tempfile.mkstemp(prefix="ds4_agent_output_")
        sink = os.fdopen(fd, "wb")
        try:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", command],
                cwd=self._cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            sink.close()
            raise ToolError(f"cannot start /bin/sh: {exc.strerror or exc}") from None
        with self._lock:
            job = _Job(self._next, proc, path, timeout_sec, time.monotonic())
            self._jobs[job.job] = job
            self._next += 1
        assert proc.stdout is not None
        job.reader = threading.Thread(
            target=self._drain,
            args=(job, proc.stdout, sink),
            name=f"ds4-bash-{job.job}",
            daemon=True,
        )
        job.reader.start()
        job.timer = threading.Timer(timeout_sec, self._expire, args=(job,))
        job.timer.daemon = True
        job.timer.start()
        return self._snapshot(job)

    def _drain(self, job: _Job, pipe: IO[bytes], sink: IO[bytes]) -> None:
        with sink, pipe:
            while True:
                chunk = pipe.read1(65536) if hasattr(pipe, "read1") else pipe.read(65536)
                if not chunk:
                    break
                sink.write(chunk)
                sink.flush()
                with job.lock:
                    job.output_bytes += len(chunk)
                    job.newlines += chunk.count(b"\n")
                    job.last_byte = chunk[-1]

    def _expire(self, job: _Job) -> None:
        if job.proc.poll() is None:
            job.timed_out = True
            self._signal_group(job, signal.SIGKILL)

    @staticmethod
    def _signal_group(job: _Job, sig: signal.Signals) -> None:
        with contextlib.suppress(OSError):
            os.killpg(job.proc.pid, sig)
        with contextlib.suppress(OSError):
            job.proc.send_signal(sig)

    def _get(self, job: int) -> _Job:
        with self._lock:
            found = self._jobs.get(job)
        if found is None:
            raise ToolError(f"bash job not found: job={job} pid=0")
        return found

    def _snapshot(self, job: _Job) -> JobSnapshot:
        code = job.proc.poll()
        now = time.monotonic()
        if code is not None:
            if job.reader is not None:
                job.reader.join(timeout=0.5)  # the last output before it is reported
            if job.ended is None:
                job.ended = now
                if job.timer is not None:
                    job.timer.cancel()
        with job.lock:
            size, newlines, last = job.output_bytes, job.newlines, job.last_byte
        lines = newlines + (1 if size and last != 0x0A else 0)
        return JobSnapshot(
            job=job.job,
            pid=job.proc.pid,
            running=code is None,
            elapsed=(job.ended or now) - job.started,
            timeout_sec=job.timeout_sec,
            timed_out=job.timed_out,
            exit_status=_exit_status(code),
            output_path=job.output_path,
            output_bytes=size,
            output_lines=lines,
        )

    def wait(self, job: int, seconds: float, cancel: CancelCheck) -> JobSnapshot:
        found = self._get(job)
        deadline = time.monotonic() + seconds
        while found.proc.poll() is None and time.monotonic() < deadline and not cancel():
            time.sleep(POLL_SECONDS)
        return self._snapshot(found)

    def snapshot(self, job: int) -> JobSnapshot:
        return self._snapshot(self._get(job))

    def stop(self, job: int, seconds: float) -> JobSnapshot:
        found = self._get(job)
        if found.proc.poll() is None:
            self._signal_group(found, signal.SIGTERM)
            try:
                found.proc.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                self._signal_group(found, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    found.proc.wait(timeout=max(STOP_GRACE, seconds))
        return self._snapshot(found)

    def find(self, job: int, pid: int) -> int | None:
        with self._lock:
            if job > 0:
                return job if job in self._jobs else None
            for known in self._jobs.values():
                if known.proc.pid == pid:
                    return known.job
        return None

    def read_output(self, job: int, start: int, length: int) -> bytes:
        path = Path(self._get(job).output_path)
        try:
            with path.open("rb") as handle:
                handle.seek(start)
                return handle.read(max(0, length))
        except OSError:
            return b""

    def forget(self, job: int) -> None:
        with self._lock:
            self._jobs.pop(job, None)

    def jobs(self) -> list[int]:
        with self._lock:
            return sorted(self._jobs)

    def close(self) -> None:
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            if job.timer is not None:
                job.timer.cancel()
            if job.proc.poll() is None:
                self._signal_group(job, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    job.proc.wait(timeout=STOP_GRACE)
