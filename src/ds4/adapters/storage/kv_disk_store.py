"""The KVStore port on a local directory.

Safety: file names come only from our own hex digests; every path is resolved and
must stay inside the directory; symlinks are never followed (O_NOFOLLOW, lstat);
files that carry our naming but fail the checks are removed with a log line, other
files are left alone. Writes go to a temp file, are fsynced, then renamed into place.
"""

from __future__ import annotations

import contextlib
import os
import stat
import struct
from collections.abc import Callable
from pathlib import Path

from ds4.domain.errors import Ds4Error
from ds4.domain.kvcache.kvc_header import (
    HEADER_SIZE,
    PREFIX_SIZE,
    KvcHeader,
    cache_key_name,
    decode_header,
    parse_cache_name,
)
from ds4.domain.kvcache.policy import CacheEntry
from ds4.ports.kv_store import KvFile

Log = Callable[[str], None]
_TMP_MARK = ".tmp."
_HEX = frozenset("0123456789abcdef")


class DiskKVStore:
    def __init__(self, directory: str | os.PathLike[str], log: Log = lambda _: None) -> None:
        self._log = log
        root = Path(directory)
        try:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise Ds4Error(f"cannot create KV cache directory {root}: {exc.strerror}") from None
        if root.is_symlink() or not root.is_dir():
            raise Ds4Error(f"KV cache path {root} is not a directory")
        self._root = root.resolve()
        self._remove_stale_temp_files()

    # ---- paths -------------------------------------------------------------

    def _path(self, sha: str) -> Path:
        if len(sha) != 40 or not set(sha) <= _HEX:
            raise Ds4Error(f"invalid KV cache key {sha!r}")
        path = (self._root / f"{sha}.kv").resolve()
        if path.parent != self._root:
            raise Ds4Error(f"KV cache path escapes {self._root}")
        return path

    def _open(self, path: Path, flags: int) -> int:
        return os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))

    def _remove(self, path: Path, why: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            self._log(f"kv cache removed {path.name}: {why}")

    def _remove_stale_temp_files(self) -> None:
        for path in self._root.iterdir():
            name = path.name
            ours = _TMP_MARK in name and parse_cache_name(name.split(_TMP_MARK)[0]) is not None
            if ours and not path.is_symlink():
                self._remove(path, "leftover temp file")

    # ---- listing -----------------------------------------------------------

    def _read_prefix(self, path: Path) -> tuple[KvcHeader, int, int] | None:
        """(header, text bytes, file size) if the file is a usable regular file."""
        try:
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                return None
            fd = self._open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            data = os.pread(fd, PREFIX_SIZE, 0)
        finally:
            os.close(fd)
        header = decode_header(data)
        if header is None or len(data) < PREFIX_SIZE:
            return None
        (text_bytes,) = struct.unpack_from("<I", data, HEADER_SIZE)
        if info.st_size < PREFIX_SIZE + text_bytes + header.payload_bytes:
            return None
        return header, text_bytes, info.st_size

    def entries(self) -> list[CacheEntry]:
        out = []
        for path in sorted(self._root.iterdir()):
            sha = parse_cache_name(path.name)
            if sha is None or path.is_symlink():
                continue  # not ours: never touched
            prefix = self._read_prefix(path)
            if prefix is None:
                self._remove(path, "unreadable, truncated or foreign header")
                continue
            header, text_bytes, size = prefix
            out.append(CacheEntry(sha, header, text_bytes, size))
        return out

    @property
    def used_bytes(self) -> int:
        return sum(e.file_size for e in self.entries())

    # ---- reading -------------------------------------------------------------

    def read(self, sha: str) -> KvFile | None:
        path = self._path(sha)
        prefix = self._read_prefix(path)
        if prefix is None:
            return None
        header, text_bytes, size = prefix
        start = PREFIX_SIZE + text_bytes
        end = start + header.payload_bytes
        fd = self._open(path, os.O_RDONLY)
        try:
            text = os.pread(fd, text_bytes, PREFIX_SIZE)
            if cache_key_name(text) != f"{sha}.kv":
                self._remove(path, "key text does not match the file name")
                return None
            # one read per section: no copy of the (large) payload out of a bigger buffer
            payload = os.pread(fd, header.payload_bytes, start)
            trailer = os.pread(fd, size - end, end) if size > end else b""
        finally:
            os.close(fd)
        if len(text) != text_bytes or len(payload) != header.payload_bytes:
            return None  # shrank since it was listed
        return KvFile(header, text, payload, trailer)

    def read_key(self, sha: str) -> bytes | None:
        path = self._path(sha)
        prefix = self._read_prefix(path)
        if prefix is None:
            return None
        fd = self._open(path, os.O_RDONLY)
        try:
            return os.pread(fd, prefix[1], PREFIX_SIZE)
        finally:
            os.close(fd)

    def read_trailer(self, sha: str) -> bytes:
        path = self._path(sha)
        prefix = self._read_prefix(path)
        if prefix is None:
            return b""
        header, text_bytes, size = prefix
        start = PREFIX_SIZE + text_bytes + header.payload_bytes
        try:
            fd = self._open(path, os.O_RDONLY)
        except OSError:
            return b""
        try:
            return os.pread(fd, size - start, start)
        finally:
            os.close(fd)

    # ---- writing -------------------------------------------------------------

    def write(self, header: KvcHeader, text: bytes, payload: bytes, trailer: bytes) -> str:
        if header.payload_bytes != len(payload):
            raise Ds4Error("KV cache header payload size does not match the payload")
        sha = cache_key_name(text)[:40]
        path = self._path(sha)
        tmp = path.with_name(f"{path.name}{_TMP_MARK}{os.getpid()}")
        fd = self._open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_EXCL)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(header.encode())
                handle.write(struct.pack("<I", len(text)))
                for part in (text, payload, trailer):
                    handle.write(part)
                handle.flush()
                os.fsync(handle.fileno())
            tmp.replace(path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._fsync_dir()
        return sha

    def update_header(self, sha: str, header: KvcHeader) -> None:
        path = self._path(sha)
        fd = self._open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, header.encode(), 0)
            os.fsync(fd)
        finally:
            os.close(fd)

    def replace_trailer(self, sha: str, header: KvcHeader, trailer: bytes) -> None:
        prefix = self._read_prefix(self._path(sha))
        if prefix is None:
            return
        end = PREFIX_SIZE + prefix[1] + header.payload_bytes
        fd = self._open(self._path(sha), os.O_WRONLY)
        try:
            os.ftruncate(fd, end)
            os.pwrite(fd, trailer, end)
            os.pwrite(fd, header.encode(), 0)
            os.fsync(fd)
        finally:
            os.close(fd)

    def delete(self, sha: str) -> None:
        self._remove(self._path(sha), "deleted")

    def _fsync_dir(self) -> None:
        with contextlib.suppress(OSError):
            fd = os.open(self._root, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
