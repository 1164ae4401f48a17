"""A cgroup v1 memory limit for one benchmark subprocess (bench/ssd_streaming_bench.py).

With cgroup v1 the page cache a process faults in is charged to its memory cgroup, so
a limit on the cgroup caps how much of a mapped file stays resident: plain mmap then
pages under the same memory budget the expert cache gets. Needs root and the memory
controller mounted at /sys/fs/cgroup/memory; `available()` says why not otherwise.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

ROOT = Path("/sys/fs/cgroup/memory")


def available() -> str | None:
    """None if a limited cgroup can be made here, else the reason it cannot."""
    if not (ROOT / "memory.limit_in_bytes").exists():
        return f"no cgroup v1 memory controller at {ROOT}"
    if not os.access(ROOT, os.W_OK):
        return f"{ROOT} is not writable (needs root)"
    return None


class MemoryCgroup:
    """A fresh cgroup under ROOT with `limit` bytes; removed by close()."""

    def __init__(self, name: str, limit: int) -> None:
        self.path = ROOT / name
        self.path.mkdir()
        try:
            (self.path / "memory.limit_in_bytes").write_text(str(limit))
            self.limit = int((self.path / "memory.limit_in_bytes").read_text())
        except OSError:
            self.path.rmdir()
            raise

    def run(self, argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """Run argv with the child placed in this cgroup before it execs."""
        procs = self.path / "cgroup.procs"

        def enter() -> None:
            procs.write_text(str(os.getpid()), encoding="ascii")

        return subprocess.run(
            list(argv), preexec_fn=enter, capture_output=True, text=True,
            timeout=timeout, check=False,
        )  # fmt: skip

    def peak(self) -> int:
        return int((self.path / "memory.max_usage_in_bytes").read_text())

    def close(self) -> None:
        # reclaim what the group still holds (the file's page cache) so the next
        # measurement starts cold, then remove it; v1 allows rmdir once no task is left
        with contextlib.suppress(OSError):  # a busy group still goes: rmdir moves
            (self.path / "memory.force_empty").write_text("0")  # its charge to the parent
        self.path.rmdir()
