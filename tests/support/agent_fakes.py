"""Fakes for the agent's ports: an in-memory workspace, a shell whose jobs finish at
once (or run until told), an IO that records what the worker shows and answers its
questions from a list, and an in-memory session index."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator

from ds4.domain.agent.screen import AgentState, AgentStatus
from ds4.domain.agent.session_meta import SessionRecord
from ds4.domain.agent.tool_catalog import ToolError
from ds4.domain.engine.cancel import CancelCheck
from ds4.ports.agent import MAX_FILE_BYTES, Approval, DirEntry, FileStamp, JobSnapshot

ROOT = "/work"


class FakeWorkspace:
    """Files by absolute path; directories are implied by the paths."""

    def __init__(self, files: dict[str, bytes] | None = None) -> None:
        self.files: dict[str, bytes] = {}
        self.writes: list[str] = []
        self._versions: dict[str, int] = {}
        for path, data in (files or {}).items():
            self.put(path, data)

    def put(self, path: str, data: bytes) -> None:
        """Change a file behind the agent's back (or seed it)."""
        full = self.resolve(path)
        self.files[full] = data
        self._versions[full] = self._versions.get(full, 0) + 1

    @property
    def root(self) -> str:
        return ROOT

    def resolve(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(ROOT, path))

    def stamp(self, path: str) -> FileStamp | None:
        full = self.resolve(path)
        if full not in self.files:
            return None
        return FileStamp(len(self.files[full]), self._versions[full])

    def read(self, path: str) -> bytes:
        full = self.resolve(path)
        if full not in self.files:
            raise ToolError(f"cannot read {path}: no such file or directory")
        data = self.files[full]
        if len(data) > MAX_FILE_BYTES:
            raise ToolError(f"file too large: {path} exceeds {MAX_FILE_BYTES} bytes")
        return data

    def write(self, path: str, data: bytes) -> None:
        self.put(path, data)
        self.writes.append(path)

    def _children(self, full: str) -> dict[str, str]:
        prefix = full.rstrip("/") + "/"
        kids: dict[str, str] = {}
        for name in sorted(self.files):
            if name.startswith(prefix):
                head, _, rest = name[len(prefix) :].partition("/")
                kids.setdefault(head, "d" if rest else "-")
        return kids

    def list_dir(self, path: str) -> list[DirEntry]:
        full = self.resolve(path)
        kids = self._children(full)
        if not kids:
            raise ToolError("opendir failed: no such file or directory")
        return [
            DirEntry(name, "d" if kind == "d" else "-", len(self.files.get(full + "/" + name, b"")))
            for name, kind in kids.items()
        ]

    def walk(self, path: str, max_depth: int) -> Iterator[str]:
        full = self.resolve(path)
        if full in self.files:
            yield path
            return
        prefix = full.rstrip("/") + "/"
        for name in sorted(self.files):
            if name.startswith(prefix) and "/.git/" not in "/" + name[len(prefix) :]:
                rel = name[len(prefix) :]
                yield rel if path in (".", "") else path.rstrip("/") + "/" + rel


class FakeShell:
    """Every job prints `ran: <command>` and exits 0 at once, except `block`, which
    runs until bash_stop (its wait returns as soon as cancel() is polled)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self._jobs: dict[int, JobSnapshot] = {}
        self._out: dict[int, bytes] = {}
        self.closed = False

    def start(self, command: str, timeout_sec: int) -> JobSnapshot:
        self.started.append(command)
        job = len(self.started)
        out = f"ran: {command}\n".encode()
        self._out[job] = out
        snap = JobSnapshot(
            job=job,
            pid=1000 + job,
            running=command == "block",
            elapsed=0.5,
            timeout_sec=timeout_sec,
            timed_out=False,
            exit_status=-1 if command == "block" else 0,
            output_path=f"/tmp/ds4_agent_output_{job}",
            output_bytes=len(out),
            output_lines=1,
        )
        self._jobs[job] = snap
        return snap

    def wait(self, job: int, seconds: float, cancel: CancelCheck) -> JobSnapshot:
        cancel()
        return self._jobs[job]

    def snapshot(self, job: int) -> JobSnapshot:
        return self._jobs[job]

    def stop(self, job: int, seconds: float) -> JobSnapshot:
        snap = self._jobs[job]
        done = JobSnapshot(
            snap.job, snap.pid, False, 1.0, snap.timeout_sec, False, 143, snap.output_path,
            snap.output_bytes, snap.output_lines,
        )  # fmt: skip
        self._jobs[job] = done
        return done

    def find(self, job: int, pid: int) -> int | None:
        if job > 0:
            return job if job in self._jobs else None
        return next((j for j, s in self._jobs.items() if s.pid == pid), None)

    def read_output(self, job: int, start: int, length: int) -> bytes:
        return self._out[job][start : start + length]

    def forget(self, job: int) -> None:
        self._jobs.pop(job, None)

    def jobs(self) -> list[int]:
        return sorted(self._jobs)

    def close(self) -> None:
        self.closed = True


class FakeIO:
    """Records output and statuses; answers confirmations from `answers` (YES when it
    runs out); `interrupt_when(status)` may latch the interrupt as the worker reports."""

    def __init__(
        self,
        answers: list[Approval] | None = None,
        interrupt_when: Callable[[AgentStatus], bool] | None = None,
    ) -> None:
        self.output: list[str] = []
        self.notices: list[str] = []
        self.statuses: list[AgentStatus] = []
        self.questions: list[str] = []
        self.queued: list[str] = []
        self.traces: list[str] = []
        self.answers = list(answers or [])
        self.interrupt_when = interrupt_when
        self.interrupt = False
        self._clock = 0.0

    @property
    def text(self) -> str:
        return "".join(self.output)

    def publish(self, text: str) -> None:
        self.output.append(text)

    def notice(self, text: str) -> None:
        self.notices.append(text)

    def set_status(self, status: AgentStatus) -> None:
        self.statuses.append(status)
        if self.interrupt_when is not None and self.interrupt_when(status):
            self.interrupt = True
            self.interrupt_when = None

    def interrupted(self) -> bool:
        return self.interrupt

    def clear_interrupt(self) -> None:
        self.interrupt = False

    def confirm(self, question: str) -> Approval:
        self.questions.append(question)
        answer = self.answers.pop(0) if self.answers else Approval.YES
        if answer is Approval.INTERRUPTED:
            self.interrupt = True
        return answer

    def take_queued(self) -> list[str]:
        queued, self.queued = self.queued, []
        return queued

    def trace(self, line: str) -> None:
        self.traces.append(line)

    def monotonic(self) -> float:
        self._clock += 0.01
        return self._clock

    def now(self) -> int:
        return 1_800_000_000

    def local_time(self) -> str:
        return "2027-01-15 10:00:00 UTC"

    def states(self) -> list[AgentState]:
        return [s.state for s in self.statuses]


class MemorySessionIndex:
    def __init__(self) -> None:
        self.saved: dict[str, SessionRecord] = {}

    def records(self) -> list[SessionRecord]:
        return list(self.saved.values())

    def put(self, record: SessionRecord) -> None:
        self.saved[record.id] = record

    def remove(self, session_id: str) -> None:
        self.saved.pop(session_id, None)
