"""kill -9 while a checkpoint is being written: no partial file is ever listed or loaded.

The writer is a child process that stops itself at a chosen point inside
DiskKVStore.write and says so through a pipe; only then is it killed, so the kill
lands mid-write however fast the disk is. Nothing here waits on the clock.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ds4.adapters.storage.kv_disk_store import DiskKVStore
from ds4.domain.kvcache.kv_file import FOOTER_SIZE, PREFIX_SIZE, cache_key_name

WAIT_S = 60.0  # turns a writer that never stops into a failure; not a timing assertion
PAYLOAD = 1 << 20

# Writes key 0 whole, then stops inside the write of key 1 (patched in the child only).
WRITER = """
import io, os, pathlib, sys
from ds4.adapters.storage.kv_disk_store import DiskKVStore
from ds4.domain.kvcache.kv_file import KvcFlags, KvcHeader, SaveReason

directory, kill_point, ready, PAYLOAD = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


def write(store, i):
    header = KvcHeader(2, SaveReason.COLD, KvcFlags.NONE, 100, 0, 4096, 7, 1, 1, PAYLOAD)
    store.write(header, f"key {i}".encode(), bytes([i % 251]) * PAYLOAD, b"")


def stop_here():
    os.write(ready, b"!")  # the parent sends SIGKILL on this byte
    sys.stdin.buffer.read()  # returns only if the parent went away first
    os._exit(3)


class HalfPayload(io.BufferedWriter):
    def write(self, data):
        if len(data) == PAYLOAD:
            super().write(data[: PAYLOAD // 2])
            self.flush()  # half the payload is in the file
            stop_here()
        return super().write(data)


store = DiskKVStore(directory)
write(store, 0)
if kill_point == "mid-payload":
    os.fdopen = lambda fd, mode: HalfPayload(io.FileIO(fd, "w"))
else:  # "before-rename": every byte written and fsynced, not yet renamed into place
    pathlib.Path.replace = lambda self, target: stop_here()
write(store, 1)
"""

# The temp file's size when the writer is killed: prefix, key text, payload so far
# (and, once everything is written, the integrity footer).
LEFT_AT = {
    "mid-payload": PREFIX_SIZE + len(b"key 1") + PAYLOAD // 2,
    "before-rename": PREFIX_SIZE + len(b"key 1") + PAYLOAD + FOOTER_SIZE,
}


def kill_writer_at(kill_point: str, directory: Path) -> tuple[bytes, int]:
    """Run WRITER until it stops at kill_point, then SIGKILL it: (its word, its exit status)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    read_end, write_end = os.pipe()
    try:
        try:
            writer = subprocess.Popen(
                [sys.executable, "-c", WRITER, str(directory), kill_point, str(write_end),
                 str(PAYLOAD)],
                env=env, stdin=subprocess.PIPE, pass_fds=(write_end,),
            )  # fmt: skip
        finally:
            os.close(write_end)  # the child has its own copy: EOF here once it is gone
        with writer:  # on the way out: its stdin closed, the child reaped
            try:
                readable = select.select([read_end], [], [], WAIT_S)[0]
                said = os.read(read_end, 1) if readable else b""
            finally:
                writer.kill()
    finally:
        os.close(read_end)
    return said, writer.returncode


@pytest.mark.parametrize("kill_point", ["mid-payload", "before-rename"])
def test_a_writer_killed_mid_write_leaves_only_whole_files(tmp_path: Path, kill_point: str) -> None:
    said, status = kill_writer_at(kill_point, tmp_path)
    assert said == b"!", f"the writer never stopped at {kill_point} (exit status {status})"
    assert status == -signal.SIGKILL
    whole, partial = (cache_key_name(f"key {i}".encode()) for i in (0, 1))
    leftovers = [p for p in tmp_path.iterdir() if ".tmp." in p.name]
    assert [p.name.split(".tmp.")[0] for p in leftovers] == [partial]  # it died inside write 1
    assert leftovers[0].stat().st_size == LEFT_AT[kill_point]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([whole, leftovers[0].name])

    logs: list[str] = []
    store = DiskKVStore(tmp_path, log=logs.append)  # opening removes the leftover
    assert sorted(p.name for p in tmp_path.iterdir()) == [whole]
    assert any("leftover temp file" in line and partial in line for line in logs)
    assert [entry.sha for entry in store.entries()] == [whole[:40]]
    kv = store.read(whole[:40])
    assert kv is not None and kv.text == b"key 0"
    assert kv.payload == bytes([0]) * PAYLOAD
    assert store.read(partial[:40]) is None
