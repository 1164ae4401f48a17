"""What the agent needs from outside the domain (docs/agent.md "How it is built"):
its front end (AgentIO), the index of saved sessions (SessionIndex), and the three
things its tools act on: the files of the working directory (Workspace), background
commands (Shell) and rendered web pages (Browser)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Literal, Protocol

from ds4.domain.agent.screen import AgentStatus
from ds4.domain.agent.session_meta import SessionRecord
from ds4.domain.engine.cancel import CancelCheck

# ---- the front end -------------------------------------------------------------------
# The worker never writes to the terminal: it publishes rendered text and status
# snapshots, asks yes/no questions, polls the user's interrupt and takes prompts typed
# while it worked. The UI (or the non-interactive driver) implements AgentIO
# thread-safely.


class Approval(Enum):
    YES = "yes"
    NO = "no"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"


class AgentIO(Protocol):
    def publish(self, text: str) -> None:
        """Output for the screen: text with ANSI SGR styling."""
        ...

    def notice(self, text: str) -> None:
        """A status message (one line or more); quiet in non-interactive mode."""
        ...

    def set_status(self, status: AgentStatus) -> None: ...

    def interrupted(self) -> bool:
        """The user asked to stop (Ctrl+C): checked at every chunk, token and wait."""
        ...

    def clear_interrupt(self) -> None: ...

    def confirm(self, question: str) -> Approval:
        """Ask yes/no; no answer within the timeout is TIMEOUT (a no)."""
        ...

    def take_queued(self) -> list[str]:
        """Prompts the user queued while the model worked (the queue is emptied)."""
        ...

    def trace(self, line: str) -> None:
        """One --trace record (time-stamped by the front end)."""
        ...

    def monotonic(self) -> float: ...

    def now(self) -> int:
        """Unix seconds."""
        ...

    def local_time(self) -> str:
        """Local date and time, `%Y-%m-%d %H:%M:%S %Z`."""
        ...


# ---- saved sessions ------------------------------------------------------------------
# The JSON records that name the agent's saved sessions; their KV state is in a KVStore
# next to them (docs/agent.md "Sessions").


class SessionIndex(Protocol):
    def records(self) -> list[SessionRecord]:
        """Every readable record (a damaged one is skipped)."""
        ...

    def put(self, record: SessionRecord) -> None:
        """Write (atomically) or replace the record of record.id."""
        ...

    def remove(self, session_id: str) -> None: ...


# ---- the working directory (docs/agent.md "Tools") -----------------------------------
# Paths are given as the model wrote them, relative to the working directory (the root)
# or absolute; `resolve` says where one really points, so the domain can decide whether
# it leaves the working directory. Failures are ToolError with the system's reason.

MAX_FILE_BYTES = 16 << 20  # read whole, at most 16 MiB

EntryKind = Literal["d", "l", "-", "?"]  # directory, symlink, regular file, other


@dataclass(frozen=True)
class DirEntry:
    name: str
    kind: EntryKind
    size: int


@dataclass(frozen=True)
class FileStamp:
    """What says a file changed: its size and modification time."""

    size: int
    mtime_ns: int


class Workspace(Protocol):
    @property
    def root(self) -> str:
        """The working directory, absolute and resolved."""
        ...

    def resolve(self, path: str) -> str:
        """The absolute path `path` names, symlinks resolved (for a file that does not
        exist yet, its parent's)."""
        ...

    def stamp(self, path: str) -> FileStamp | None:
        """Size and mtime of a regular file, None when there is none."""
        ...

    def read(self, path: str) -> bytes:
        """A regular file's bytes (at most MAX_FILE_BYTES: `file too large: <path>
        exceeds 16777216 bytes`)."""
        ...

    def write(self, path: str, data: bytes) -> None:
        """Create or replace a file atomically (temp file in the same directory, then
        rename), keeping an existing file's mode; missing parent directories are made."""
        ...

    def list_dir(self, path: str) -> list[DirEntry]:
        """Entries in directory order, `.` and `..` left out, symlinks not followed."""
        ...

    def walk(self, path: str, max_depth: int) -> Iterator[str]:
        """Regular files under `path` (or `path` itself when it is a file), as paths
        joined onto `path`; `.git` skipped, symlinks never followed."""
        ...


# ---- background commands (docs/agent.md "Tools", bash) -------------------------------
# Each command runs as `/bin/sh -c` in its own process group with stdin from /dev/null,
# its stdout and stderr merged into a private temp file that outlives the job. Waiting
# is the adapter's business (the domain reads no clock); a job past its timeout is
# killed with its whole group.


@dataclass(frozen=True)
class JobSnapshot:
    job: int
    pid: int
    running: bool
    elapsed: float  # seconds since start (until exit once done)
    timeout_sec: int
    timed_out: bool
    exit_status: int  # exit code, 128 + signal when killed, -1 unknown (and while running)
    output_path: str
    output_bytes: int
    output_lines: int  # newlines, plus one when the output does not end with one


class Shell(Protocol):
    def start(self, command: str, timeout_sec: int) -> JobSnapshot:
        """Start a job (ids 1, 2, ... per process); ToolError when it cannot start."""
        ...

    def wait(self, job: int, seconds: float, cancel: CancelCheck) -> JobSnapshot:
        """Wait until the job ends, `seconds` pass or cancel() says so (polled at least
        every 100 ms)."""
        ...

    def snapshot(self, job: int) -> JobSnapshot: ...

    def stop(self, job: int, seconds: float) -> JobSnapshot:
        """SIGTERM to the group and the process, SIGKILL after 1 s, then wait at most
        `seconds` for the exit."""
        ...

    def find(self, job: int, pid: int) -> int | None:
        """A job by id, or by pid when `job` <= 0."""
        ...

    def read_output(self, job: int, start: int, length: int) -> bytes: ...

    def forget(self, job: int) -> None:
        """Drop a finished job from the table (its output file stays)."""
        ...

    def jobs(self) -> list[int]: ...

    def close(self) -> None:
        """Kill every job still running (the agent is leaving)."""
        ...


# ---- web pages (docs/agent.md, visit_page) -------------------------------------------
# A page rendered by a real browser engine, as text.


class Browser(Protocol):
    def visit(self, url: str, cancel: CancelCheck) -> str:
        """The rendered page as Markdown-like text (title, headings, links, text);
        ToolError naming what to install when no browser is available."""
        ...

    def close(self) -> None: ...
