"""Disk KV cache restore throughput beside the disk's sequential read throughput.

Writes one checkpoint of --mib MiB through the real store (temp + fsync + rename),
then times, in the same run and on the same file: a plain sequential read of the file
(os.pread in 8 MiB pieces) and a full restore through DiskCache.load (directory scan,
prefix lookup, header/key checks, payload read, the session copying the payload into
its own buffer, header update). Both read through the page cache unless the file is
larger than RAM; the ratio is what matters: the restore path should run at close to
the disk's speed. A read into freshly allocated memory is shown too: a restore
must land the payload in new pages, and page faults cost as much as the copy. The
restore verifies the file's XXH3 checksum (docs/adr/0007-kv-file-integrity.md); the
hash alone, over the payload in memory, is timed as well.
Run: .venv/bin/python bench/kv_restore_bench.py [--mib 1024] [--dir D]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ds4.adapters.storage.kv_disk_store import DiskKVStore
from ds4.adapters.system import SystemClock
from ds4.domain.engine.session import EngineSession
from ds4.domain.kvcache.disk_cache import DiskCache
from ds4.domain.kvcache.kv_file import SaveReason, body_digest
from ds4.domain.kvcache.policy import KvCacheOptions
from ds4.ports.compute import StateCheckpoint

KEY = b"<bench> a rendered prompt used as the cache key"


class BufferSession:
    """A ComputeSession whose state is one byte buffer (what a restore must at least copy);
    it evaluates nothing."""

    def __init__(self, payload: bytes = b"") -> None:
        self.state = np.frombuffer(payload, dtype=np.uint8).copy()
        self._tokens = list(range(1000)) if payload else []

    @property
    def ctx(self) -> int:
        return 1 << 20

    @property
    def tokens(self) -> Sequence[int]:
        return self._tokens

    def payload(self) -> bytes:
        return self.state.tobytes()

    def load_payload(self, data: bytes) -> None:
        self.state = np.frombuffer(data, dtype=np.uint8).copy()
        self._tokens = list(range(1000))

    def invalidate(self) -> None:
        self._tokens = []

    def prefill(self, tokens: Sequence[int], **_: object) -> npt.NDArray[np.float32]:
        raise NotImplementedError("a buffer evaluates nothing")

    def eval(self, token: int) -> npt.NDArray[np.float32]:
        raise NotImplementedError("a buffer evaluates nothing")

    def logits(self) -> npt.NDArray[np.float32]:
        raise NotImplementedError("a buffer evaluates nothing")

    def rewind_floor(self, n: int) -> int:
        return 0

    def rewind(self, n: int) -> None:
        raise NotImplementedError("a buffer cannot rewind")

    def checkpoint(self) -> StateCheckpoint:
        raise NotImplementedError("only payloads are measured")

    def restore(self, checkpoint: StateCheckpoint) -> None:
        raise NotImplementedError("only payloads are measured")


def sequential_read(path: Path) -> float:
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        offset = 0
        while chunk := os.pread(fd, 8 << 20, offset):
            offset += len(chunk)
    finally:
        os.close(fd)
    return offset / (time.perf_counter() - start)


def fresh_read(path: Path) -> float:
    """One read of the whole file into new memory (page faults included)."""
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        size = len(os.pread(fd, path.stat().st_size, 0))
    finally:
        os.close(fd)
    return size / (time.perf_counter() - start)


def checksum(payload: bytes) -> float:
    """XXH3 of key and payload, as a restore computes it, over bytes already in memory."""
    start = time.perf_counter()
    body_digest(KEY, payload)
    return len(payload) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512, help="payload size")
    parser.add_argument("--dir", help="cache directory (default: a temp dir)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        opts = KvCacheOptions(budget_bytes=0, min_tokens=1)
        cache = DiskCache(DiskKVStore(tmp), SystemClock(), opts, quant_bits=2, model_tag=1)
        rng = np.random.default_rng(0)
        payload = rng.integers(0, 256, args.mib << 20, dtype=np.uint8).tobytes()
        start = time.perf_counter()
        cache.save(EngineSession(BufferSession(payload)), KEY, SaveReason.COLD)
        write = len(payload) / (time.perf_counter() - start)
        (path,) = Path(tmp).glob("*.kv")
        size = path.stat().st_size
        best_read = max(sequential_read(path) for _ in range(args.repeat))
        best_fresh = max(fresh_read(path) for _ in range(args.repeat))
        best_hash = max(checksum(payload) for _ in range(args.repeat))
        best_restore = 0.0
        for _ in range(args.repeat):
            buffer = BufferSession()
            start = time.perf_counter()
            loaded = cache.load(EngineSession(buffer), KEY + b" and the new turn")
            elapsed = time.perf_counter() - start
            assert loaded is not None and buffer.state.nbytes == len(payload)
            best_restore = max(best_restore, size / elapsed)
    gb = 1e9
    print(f"checkpoint: {size / 2**20:.0f} MiB")
    print(f"write (temp + fsync + rename): {write / gb:.2f} GB/s")
    print(f"sequential read (same file):   {best_read / gb:.2f} GB/s")
    print(f"one read into new memory:      {best_fresh / gb:.2f} GB/s")
    print(f"xxh3 checksum (in memory):     {best_hash / gb:.2f} GB/s")
    print(f"restore (DiskCache.load):      {best_restore / gb:.2f} GB/s "
          f"({100 * best_restore / best_read:.0f}% of the read)")  # fmt: skip


if __name__ == "__main__":
    main()
