"""The memory limits read from the kernel's files (ds4.domain.memory parsers, and
adapters/system.py's SystemMemory over a fake /proc and /sys/fs/cgroup)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4.adapters.system import SystemMemory
from ds4.domain.memory import (
    GIB,
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

MEMINFO = "MemTotal:       32000000 kB\nMemFree:  100 kB\nMemAvailable:   22390000 kB\n"
STATUS = "Name:\tpython\nVmPeak:\t  300000 kB\nVmSize:\t  204800 kB\nVmRSS:\t 1000 kB\n"
CGROUP_V2 = "0::/user.slice/user-1000.slice/session-3.scope\n"
CGROUP_V1 = "5:cpu,cpuacct:/\n4:memory:/docker/abc123\n0::/\n"
MOUNTINFO_V1 = (
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
)


def test_meminfo_and_status() -> None:
    assert parse_mem_available(MEMINFO) == 22390000 * 1024
    assert parse_vm_size(STATUS) == 204800 * 1024
    assert parse_mem_available("MemTotal: 5 kB\n") is None
    assert parse_mem_available("MemAvailable: lots kB\n") is None
    assert parse_mem_available("MemAvailable: 99999999999999999999 kB\n") is None  # > 1 EiB


def test_cgroup_paths() -> None:
    assert cgroup_v2_path(CGROUP_V2) == "/user.slice/user-1000.slice/session-3.scope"
    assert cgroup_v2_path("0::/\n") == "/"
    assert cgroup_v2_path("0::/../etc\n") is None
    assert cgroup_v2_path(CGROUP_V1.replace("0::/\n", "")) is None
    assert cgroup_v1_memory_path(CGROUP_V1) == "/docker/abc123"
    assert cgroup_v1_memory_path("3:cpu,memory:/a/b\n") == "/a/b"
    assert cgroup_v1_memory_path("garbage\n") is None
    assert cgroup_v1_memory_mount(MOUNTINFO_V1) == ("/sys/fs/cgroup/memory", "/")
    assert cgroup_v1_memory_mount("nonsense line\n") is None


def test_v1_dir_under_a_container_root() -> None:
    # a container that mounts its own cgroup as the hierarchy's root
    assert cgroup_v1_dir(("/sys/fs/cgroup/memory", "/docker/abc"), "/docker/abc") == (
        "/sys/fs/cgroup/memory"
    )
    assert cgroup_v1_dir(("/sys/fs/cgroup/memory", "/"), "/docker/abc") == (
        "/sys/fs/cgroup/memory/docker/abc"
    )


@pytest.mark.parametrize(
    ("limit", "usage", "want"),
    [
        ("5368709120\n", "1073741824\n", 4 * GIB),  # v2 or v1 limit - usage
        ("max\n", "123\n", None),  # v2: no limit
        ("9223372036854771712\n", "123\n", None),  # v1: LONG_MAX rounded to a page
        ("1000\n", "5000\n", 0),  # over the limit: no room, never negative
        ("", "", None),  # unreadable
        ("-1\n", "0\n", None),  # garbage
        ("12abc\n", "0\n", None),
        ("5368709120\n", "what\n", 5 * GIB),  # usage unreadable: the limit alone
    ],
)
def test_cgroup_room(limit: str, usage: str, want: int | None) -> None:
    assert cgroup_room(limit, usage) == want


def test_address_space_room() -> None:
    assert address_space_room(-1, 100) is None  # RLIM_INFINITY
    assert address_space_room(8 * GIB, 2 * GIB) == 6 * GIB
    assert address_space_room(GIB, None) == GIB
    assert address_space_room(GIB, 2 * GIB) == 0


def test_the_smallest_limit_wins() -> None:
    limits = MemoryLimits(available=20 * GIB, cgroup=5 * GIB, address_space=None, physical=1)
    assert limits.room() == (5 * GIB, "cgroup limit")
    assert MemoryLimits(available=3 * GIB, cgroup=5 * GIB).room() == (3 * GIB, "MemAvailable")
    assert MemoryLimits(physical=7).room() == (7, "physical memory")


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_system_memory_v2_nested(tmp_path: Path) -> None:
    cg = "/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope"
    _tree(tmp_path, {
        "/proc/meminfo": MEMINFO,
        "/proc/self/cgroup": CGROUP_V2,
        "/proc/self/status": STATUS,
        cg + "/memory.max": "5368709120\n",
        cg + "/memory.current": "536870912\n",
    })  # fmt: skip
    limits = SystemMemory(str(tmp_path)).limits()
    assert limits.available == 22390000 * 1024
    assert limits.cgroup == 5 * GIB - GIB // 2
    assert limits.room() == (5 * GIB - GIB // 2, "cgroup limit")


def test_system_memory_v1(tmp_path: Path) -> None:
    cg = "/sys/fs/cgroup/memory/docker/abc123"
    _tree(tmp_path, {
        "/proc/meminfo": MEMINFO,
        "/proc/self/cgroup": CGROUP_V1.replace("0::/\n", ""),
        "/proc/self/mountinfo": MOUNTINFO_V1,
        cg + "/memory.limit_in_bytes": "2147483648\n",
        cg + "/memory.usage_in_bytes": "1073741824\n",
    })  # fmt: skip
    assert SystemMemory(str(tmp_path)).limits().cgroup == GIB


def test_system_memory_nothing_readable(tmp_path: Path) -> None:
    limits = SystemMemory(str(tmp_path)).limits()
    assert (limits.available, limits.cgroup) == (None, None)
    assert limits.room()[1] in ("physical memory", "RLIMIT_AS")


def test_system_memory_garbage(tmp_path: Path) -> None:
    _tree(tmp_path, {
        "/proc/meminfo": "\x00\xff garbage",
        "/proc/self/cgroup": "0::not a path\n",
        "/sys/fs/cgroup/memory.max": "banana",
    })  # fmt: skip
    limits = SystemMemory(str(tmp_path)).limits()
    assert (limits.available, limits.cgroup) == (None, None)
