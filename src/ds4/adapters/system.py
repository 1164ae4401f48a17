"""The system's clocks, pauses, entropy and memory limits: the ports of ports/system.py
(Clock, Timer, Pacer, RandomSource, MemoryRoom) on the standard library and Linux's
/proc and /sys/fs/cgroup files."""

from __future__ import annotations

import os
import resource
import secrets
import time
from pathlib import Path

from ds4.domain.memory import (
    MemoryLimits,
    address_space_room,
    cgroup_room,
    cgroup_v1_dir,
    cgroup_v1_memory_mount,
    cgroup_v1_memory_path,
    cgroup_v2_path,
    parse_mem_available,
    parse_vm_size,
)


class SystemClock:
    """Clock, Timer and Pacer at once: wall and monotonic time and time.sleep."""

    def now(self) -> int:
        return int(time.time())

    def unix(self) -> int:
        return int(time.time())

    def elapsed(self) -> float:
        return time.monotonic()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class SystemRandom:
    """RandomSource on the operating system's CSPRNG."""

    def token_bytes(self, n: int) -> bytes:
        return secrets.token_bytes(n)


def _read(path: str) -> str:
    """A small kernel file's text; "" where it cannot be read (no limit from it)."""
    try:
        with Path(path).open(encoding="ascii", errors="replace") as f:
            return f.read(1 << 20)
    except OSError:
        return ""


class SystemMemory:
    """MemoryRoom on Linux's files: /proc/meminfo, the process's cgroup (v2 memory.max
    minus memory.current, or v1 memory.limit_in_bytes minus memory.usage_in_bytes) and
    RLIMIT_AS minus VmSize. `root` moves /proc and /sys/fs/cgroup (tests)."""

    def __init__(self, root: str = "") -> None:
        self._root = root

    def limits(self) -> MemoryLimits:
        try:
            physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (OSError, ValueError):
            physical = 0
        return MemoryLimits(
            available=parse_mem_available(_read(self._root + "/proc/meminfo")),
            cgroup=self._cgroup_room(),
            address_space=self._address_space_room(),
            physical=physical,
        )

    def _cgroup_room(self) -> int | None:
        cgroup = _read(self._root + "/proc/self/cgroup")
        v2 = cgroup_v2_path(cgroup)
        if v2 is not None:
            d = self._root + "/sys/fs/cgroup" + (v2 if v2 != "/" else "")
            if Path(d + "/memory.max").exists():
                return cgroup_room(_read(d + "/memory.max"), _read(d + "/memory.current"))
        v1 = cgroup_v1_memory_path(cgroup)
        mount = cgroup_v1_memory_mount(_read(self._root + "/proc/self/mountinfo"))
        if v1 is None or mount is None:
            return None
        d = self._root + cgroup_v1_dir(mount, v1)
        return cgroup_room(_read(d + "/memory.limit_in_bytes"), _read(d + "/memory.usage_in_bytes"))

    def _address_space_room(self) -> int | None:
        try:
            soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        except (OSError, ValueError):
            return None
        if soft == resource.RLIM_INFINITY:
            return None
        return address_space_room(soft, parse_vm_size(_read(self._root + "/proc/self/status")))
