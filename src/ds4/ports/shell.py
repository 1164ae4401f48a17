"""Shell: the agent's background commands (docs/agent.md "Tools", bash).

Each command runs as `/bin/sh -c` in its own process group with stdin from /dev/null,
its stdout and stderr merged into a private temp file that outlives the job. Waiting is
the adapter's business (the domain reads no clock); a job past its timeout is killed
with its whole group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ds4.domain.engine.cancel import CancelCheck


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
