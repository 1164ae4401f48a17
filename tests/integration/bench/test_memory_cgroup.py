"""bench/memory_cgroup.py: a subprocess placed in a limited cgroup v1 memory group (the
SSD bench's plain-mmap baseline), the group removed afterwards. Skipped where no group
can be made (not root, no v1 memory controller)."""

from __future__ import annotations

import os
import sys

import pytest
from bench import memory_cgroup

WHY_NOT = memory_cgroup.available()


@pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))
def test_the_child_runs_inside_the_limited_group_and_the_group_goes() -> None:
    name = f"ds4_test_cgroup_{os.getpid()}"
    group = memory_cgroup.MemoryCgroup(name, 256 << 20)
    try:
        assert group.limit == 256 << 20
        done = group.run([sys.executable, "-c", "print(open('/proc/self/cgroup').read())"],
                         timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        memory_line = next(ln for ln in done.stdout.splitlines() if ":memory:" in ln)
        assert memory_line.endswith("/" + name)
        assert 0 < group.peak() <= 256 << 20
    finally:
        group.close()
    assert not group.path.exists()


def test_unavailable_is_explained_not_raised() -> None:
    assert WHY_NOT is None or "cgroup" in WHY_NOT or "root" in WHY_NOT
