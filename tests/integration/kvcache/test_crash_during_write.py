"""kill -9 while a checkpoint is being written: no partial file is ever listed or loaded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ds4.adapters.storage.kv_disk_store import DiskKVStore

WRITER = """
import sys
from ds4.adapters.storage.kv_disk_store import DiskKVStore
from ds4.domain.kvcache.kvc_header import KvcFlags, KvcHeader, SaveReason
store = DiskKVStore(sys.argv[1])
payload_size = 32 << 20
for i in range(1000):
    payload = bytes([i % 251]) * payload_size
    header = KvcHeader(2, SaveReason.COLD, KvcFlags.NONE, 100, 0, 4096, 7, 1, 1, payload_size)
    store.write(header, f"key {i}".encode(), payload, b"")
"""


def test_a_writer_killed_mid_write_leaves_only_whole_files(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], env=env)
    try:
        deadline = time.monotonic() + 60
        # wait for a whole file and the next one in progress
        while not (list(tmp_path.glob("*.kv")) and list(tmp_path.glob("*.tmp.*"))):
            assert writer.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
        time.sleep(0.05)  # well inside the 32 MiB write
        writer.send_signal(signal.SIGKILL)
    finally:
        writer.wait(30)
    assert any(".tmp." in p.name for p in tmp_path.iterdir())  # it died mid-write
    logs: list[str] = []
    store = DiskKVStore(tmp_path, log=logs.append)  # opening removes the leftover
    assert not any(".tmp." in p.name for p in tmp_path.iterdir())
    assert any("leftover temp file" in line for line in logs)
    entries = store.entries()
    assert entries
    for entry in entries:
        kv = store.read(entry.sha)
        assert kv is not None and len(kv.payload) == kv.header.payload_bytes
        index = int(kv.text.decode().split()[1])
        assert kv.payload == bytes([index % 251]) * kv.header.payload_bytes
