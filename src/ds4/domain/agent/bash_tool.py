"""`bash`, `bash_status`, `bash_stop`: what the model sees of a background job
(docs/agent.md "Tools", bash).

The first observation of a job shows the head of its output (at most 100 lines and
8 KiB), whole and inline when the job is done and that is all of it; later ones show
the tail (4 lines while running, 20 once done, from the last 32 KiB). A finished job
leaves the table once its final observation is returned.
"""

from __future__ import annotations

from ds4.ports.shell import JobSnapshot, Shell

HEAD_LINES = 100
HEAD_BYTES = 8 << 10
TAIL_WINDOW = 32 << 10
TAIL_RUNNING = 4
TAIL_DONE = 20
DEFAULT_TIMEOUT = 3600
DEFAULT_REFRESH = 60


def _head(data: bytes) -> bytes:
    lines = data.split(b"\n")
    if len(lines) > HEAD_LINES:
        return b"\n".join(lines[:HEAD_LINES])
    return data


def _tail(data: bytes, count: int) -> bytes:
    lines = data.rstrip(b"\n").split(b"\n")
    return b"\n".join(lines[-count:])


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").rstrip("\n")


def status_lines(snap: JobSnapshot) -> str:
    if snap.running:
        return (
            f"bash job={snap.job} pid={snap.pid} status=running elapsed_sec={snap.elapsed:.1f} "
            f"timeout_sec={snap.timeout_sec}"
        )
    return (
        f"bash job={snap.job} pid={snap.pid} status=done elapsed_sec={snap.elapsed:.1f} "
        f"timed_out={int(snap.timed_out)}\nexit_status={snap.exit_status}"
    )


class BashJobs:
    """The model's view of the shell's jobs: which have been observed, what to show."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell
        self._observed: set[int] = set()

    def observe(self, snap: JobSnapshot) -> str:
        out = [status_lines(snap)]
        path = snap.output_path
        stats = f"output_path={path} ({snap.output_bytes} bytes, {snap.output_lines} lines)"
        if snap.output_bytes == 0:
            out.append("<output>\n</output>")
        elif snap.job not in self._observed:
            head = _head(self.shell.read_output(snap.job, 0, HEAD_BYTES))
            if not snap.running and len(head) >= snap.output_bytes:
                out.append(f"<output>\n{_text(head)}\n</output>")
            else:
                out.append(f"{stats}\n<head -{HEAD_LINES} {path}>\n{_text(head)}\n</head>")
        else:
            count = TAIL_RUNNING if snap.running else TAIL_DONE
            start = max(0, snap.output_bytes - TAIL_WINDOW)
            window = self.shell.read_output(snap.job, start, snap.output_bytes - start)
            out.append(f"{stats}\n<tail -{count} {path}>\n{_text(_tail(window, count))}\n</tail>")
        self._observed.add(snap.job)
        if snap.running:
            out.append(
                f"\nUse bash_status job={snap.job} to get info before refresh time; "
                f"use bash_stop job={snap.job} to stop execution"
            )
        else:
            self._observed.discard(snap.job)
            self.shell.forget(snap.job)
        return "\n".join(out) + "\n"

    def running_updates(self) -> str:
        """After a compaction: the jobs still in the table, each observed again."""
        parts = []
        for job in self.shell.jobs():
            parts.append(f"\nJob {job}:\n" + self.observe(self.shell.snapshot(job)))
        return "".join(parts)
