"""The KVStore port on a local directory, the quarantine for damaged files, and the
directory's byte count for /metrics.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import struct
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ds4.adapters.storage.kv_file_reader import (
    Damaged,
    FileLayout,
    read_body,
    read_exact,
    read_layout,
)
from ds4.domain.errors import Ds4Error
from ds4.domain.kvcache.kv_file import (
    FOOTER_SIZE,
    PREFIX_SIZE,
    KvcFlags,
    KvcHeader,
    body_digest,
    cache_key_name,
    make_footer,
    parse_cache_name,
)
from ds4.domain.kvcache.policy import CacheEntry
from ds4.ports.kv_store import KvFile

# --- The store ------------------------------------------------------------------------
# The KVStore port on a local directory.
#
# Safety (docs/adr/0006-kv-cache-files.md, docs/adr/0007-kv-file-integrity.md): file names
# come only from our own hex digests, so every path stays inside the directory; symlinks
# are never followed (O_NOFOLLOW, lstat), nothing blocks on a FIFO (O_NONBLOCK), and other
# non-regular files with our naming are skipped with a log line. Every file is verified
# before any of its bytes is used (the header and trailer on listing, key and payload on
# reading); one that fails is moved into `quarantine/` (or, where it cannot be moved,
# skipped from then on). Writes go to a temp file, are fsynced, then renamed into place;
# the few in-place writes (hit count, trailer) only touch a file that has one link, so a
# hard link never carries them elsewhere. In a read-only directory, reads work and every
# write is a logged miss.

Log = Callable[[str], None]
_TMP_MARK = ".tmp."
_HEX = frozenset("0123456789abcdef")
# Never through a symlink; never waiting on a FIFO put where a file was listed.
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
# A file that failed its checks but could not be moved aside: skipped while unchanged.
_FileId = tuple[int, int, int]  # inode, size, mtime in ns


def _file_id(info: os.stat_result) -> _FileId:
    return info.st_ino, info.st_size, info.st_mtime_ns


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
        try:
            names = [path.name for path in self._root.iterdir()]
        except OSError as exc:
            raise Ds4Error(f"KV cache directory {root} is not readable: {exc.strerror}") from None
        self._quarantine = Quarantine(self._root, log)
        self._unusable: dict[str, _FileId] = {}
        self._reported: set[str] = set()  # names already logged as skipped
        self._remove_stale_temp_files(names)

    # ---- paths and files ---------------------------------------------------

    def _path(self, sha: str) -> Path:
        """The file of a key digest; not resolved, so a symlink there is seen, not followed."""
        if len(sha) != 40 or not set(sha) <= _HEX:
            raise Ds4Error(f"invalid KV cache key {sha!r}")
        return self._root / f"{sha}.kv"

    def _open(self, path: Path, flags: int) -> tuple[int, os.stat_result] | None:
        """An fd on `path` if it is a regular file (never through a symlink), else None."""
        try:
            fd = os.open(path, flags | _OPEN_FLAGS)
        except OSError:
            return None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            return None
        return fd, info

    def _report_once(self, name: str, line: str) -> None:
        if name not in self._reported:
            self._reported.add(name)
            self._log(line)

    def _remove(self, path: Path, why: str) -> None:
        try:
            path.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            self._log(f"kv cache could not remove {path.name} ({why}): {exc.strerror}")
            return
        self._log(f"kv cache removed {path.name}: {why}")

    def _set_aside(self, path: Path, info: os.stat_result, why: str) -> None:
        """A damaged file: into quarantine, or (if it cannot move) skipped while unchanged."""
        if not self._quarantine.take(path.name, why):
            self._unusable[path.name] = _file_id(info)

    def _remove_stale_temp_files(self, names: list[str]) -> None:
        for name in names:
            if _TMP_MARK not in name or parse_cache_name(name.split(_TMP_MARK)[0]) is None:
                continue
            path = self._root / name
            with contextlib.suppress(OSError):
                if stat.S_ISREG(path.lstat().st_mode):
                    self._remove(path, "leftover temp file")
                else:
                    self._report_once(name, f"kv cache skipped {name}: not a regular file")

    # ---- listing -----------------------------------------------------------

    def _layout(self, path: Path, fd: int, info: os.stat_result) -> FileLayout | None:
        """The verified layout, or None after setting a damaged file aside."""
        if self._unusable.get(path.name) == _file_id(info):
            return None
        try:
            layout = read_layout(fd, info.st_size)
        except OSError as exc:
            layout = Damaged(f"unreadable: {exc.strerror}")
        if isinstance(layout, Damaged):
            self._set_aside(path, info, layout.why)
            return None
        return layout

    def _list_one(self, path: Path, sha: str) -> CacheEntry | None:
        try:
            mode = path.lstat().st_mode
        except OSError:
            return None
        if stat.S_ISLNK(mode):
            return None  # not ours: never followed, never touched
        opened = self._open(path, os.O_RDONLY) if stat.S_ISREG(mode) else None
        if opened is None:
            self._report_once(path.name, f"kv cache skipped {path.name}: not a regular file")
            return None
        fd, info = opened
        try:
            layout = self._layout(path, fd, info)
        finally:
            os.close(fd)
        if layout is None:
            return None
        if layout.body is None:
            self._report_once(
                path.name,
                f"kv cache will not load {path.name}: written without a checksum "
                "(by the C engine or an older ds4); it counts against the budget only",
            )
        return CacheEntry(sha, layout.header, layout.text_bytes, info.st_size)

    def entries(self) -> list[CacheEntry]:
        out = []
        for name in sorted(path.name for path in self._root.iterdir()):
            sha = parse_cache_name(name)
            if sha is not None:
                entry = self._list_one(self._root / name, sha)
                if entry is not None:
                    out.append(entry)
        return out

    @property
    def used_bytes(self) -> int:
        return sum(e.file_size for e in self.entries())

    # ---- reading -------------------------------------------------------------

    def read(self, sha: str) -> KvFile | None:
        path = self._path(sha)
        opened = self._open(path, os.O_RDONLY)
        if opened is None:
            return None
        fd, info = opened
        try:
            layout = self._layout(path, fd, info)
            if layout is None or layout.body is None:
                return None  # set aside, or written without a checksum: never loaded
            try:
                body = read_body(fd, layout)
            except OSError as exc:
                body = Damaged(f"unreadable: {exc.strerror}")
        finally:
            os.close(fd)
        if isinstance(body, Damaged):
            self._set_aside(path, info, body.why)
            return None
        text, payload = body
        if cache_key_name(text) != path.name:
            self._set_aside(path, info, "key text does not match the file name")
            return None
        return KvFile(layout.header, text, payload, layout.sections)

    def read_key(self, sha: str) -> bytes | None:
        """The key text, checked against the file name (its SHA-1)."""
        path = self._path(sha)
        opened = self._open(path, os.O_RDONLY)
        if opened is None:
            return None
        fd, info = opened
        try:
            layout = self._layout(path, fd, info)
            text = read_exact(fd, layout.text_bytes, PREFIX_SIZE) if layout else None
        except OSError:
            return None
        finally:
            os.close(fd)
        return text if text is not None and cache_key_name(text) == path.name else None

    def read_trailer(self, sha: str) -> bytes:
        """The verified trailer sections (b"" if none, or if the file cannot be verified)."""
        path = self._path(sha)
        opened = self._open(path, os.O_RDONLY)
        if opened is None:
            return b""
        fd, info = opened
        try:
            layout = self._layout(path, fd, info)
        finally:
            os.close(fd)
        return layout.sections if layout is not None and layout.body is not None else b""

    # ---- writing -------------------------------------------------------------

    def write(self, header: KvcHeader, text: bytes, payload: bytes, trailer: bytes) -> str:
        if header.payload_bytes != len(payload):
            raise Ds4Error("KV cache header payload size does not match the payload")
        sha = cache_key_name(text)[:40]
        path = self._path(sha)
        raw = replace(header, flags=header.flags | KvcFlags.CHECKSUM).encode()
        footer = make_footer(raw, trailer, body_digest(text, payload))
        tmp = path.with_name(f"{path.name}{_TMP_MARK}{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(raw)
                handle.write(struct.pack("<I", len(text)))
                for part in (text, payload, trailer, footer):
                    handle.write(part)
                handle.flush()
                os.fsync(handle.fileno())
            tmp.replace(path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._fsync_dir()
        return sha

    def _open_for_update(self, sha: str, header: KvcHeader) -> tuple[int, FileLayout] | None:
        """A writable fd on a verified file that has exactly one link and the payload
        `header` describes, or None (logged)."""
        path = self._path(sha)
        try:
            fd = os.open(path, os.O_RDWR | _OPEN_FLAGS)
        except OSError as exc:
            self._log(f"kv cache could not update {path.name}: {exc.strerror}")
            return None
        info = os.fstat(fd)
        layout = None
        if not stat.S_ISREG(info.st_mode):
            self._log(f"kv cache left {path.name} alone: not a regular file")
        elif info.st_nlink != 1:
            self._log(
                f"kv cache left {path.name} alone: it has {info.st_nlink} links, and a file "
                "shared with another name is never written in place"
            )
        else:
            layout = self._layout(path, fd, info)
            if layout is not None and layout.body is None:
                layout = None  # written without a checksum: never updated, only replaced
            if layout is not None and layout.header.payload_bytes != header.payload_bytes:
                self._log(f"kv cache left {path.name} alone: the new header is for another payload")
                layout = None
        if layout is None:
            os.close(fd)
            return None
        return fd, layout

    def update_header(self, sha: str, header: KvcHeader) -> None:
        opened = self._open_for_update(sha, header)
        if opened is None:
            return
        fd, layout = opened
        assert layout.body is not None
        try:
            # the footer is rewritten, so the flag that announces it stays set
            raw = replace(header, flags=header.flags | KvcFlags.CHECKSUM).encode()
            os.pwrite(fd, raw, 0)
            os.pwrite(fd, make_footer(raw, layout.sections, layout.body), layout.size - FOOTER_SIZE)
            os.fsync(fd)
        finally:
            os.close(fd)

    def replace_trailer(self, sha: str, header: KvcHeader, trailer: bytes) -> None:
        opened = self._open_for_update(sha, header)
        if opened is None:
            return
        fd, layout = opened
        assert layout.body is not None
        try:
            raw = replace(header, flags=header.flags | KvcFlags.CHECKSUM).encode()
            os.ftruncate(fd, layout.payload_end)
            os.pwrite(fd, trailer + make_footer(raw, trailer, layout.body), layout.payload_end)
            os.pwrite(fd, raw, 0)
            os.fsync(fd)
        finally:
            os.close(fd)

    def delete(self, sha: str) -> None:
        path = self._path(sha)
        with contextlib.suppress(OSError):
            if not stat.S_ISREG(path.lstat().st_mode):
                return  # a directory or symlink with our naming is not ours to remove
        self._remove(path, "deleted")

    def _fsync_dir(self) -> None:
        with contextlib.suppress(OSError):
            fd = os.open(self._root, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


# --- Quarantine -----------------------------------------------------------------------
# Damaged `.kv` files, moved aside instead of deleted (docs/adr/0007-kv-file-integrity.md).
#
# A file that fails its checks is renamed into `<cache dir>/quarantine/` as
# `<20-digit ns timestamp>-<name>`, with a log line, so an operator can look at it; the
# cache never lists that directory. Only the newest KEEP files stay there, so a failing
# disk cannot fill itself up. Every step goes through directory descriptors opened with
# O_NOFOLLOW: a symlink planted as `quarantine` is never followed.

KEEP = 4
DIRECTORY = "quarantine"
_KEPT_NAME = re.compile(r"\d{20}-[0-9a-fA-F]{40}\.kv")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class Quarantine:
    def __init__(self, root: str | os.PathLike[str], log: Log) -> None:
        self._root = root
        self._log = log

    def take(self, name: str, why: str) -> bool:
        """Move the cache file `name` aside; False (logged) when it cannot be moved."""
        kept = f"{time.time_ns():020d}-{name}"
        try:
            root_fd = os.open(self._root, _DIR_FLAGS)
        except OSError as exc:
            self._log(f"kv cache could not quarantine {name} ({why}): {exc.strerror}")
            return False
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(DIRECTORY, 0o700, dir_fd=root_fd)
            qfd = os.open(DIRECTORY, _DIR_FLAGS, dir_fd=root_fd)
            try:
                os.rename(name, kept, src_dir_fd=root_fd, dst_dir_fd=qfd)
                self._log(f"kv cache quarantined {name}: {why} (kept as {DIRECTORY}/{kept})")
                self._trim(qfd)
            finally:
                os.close(qfd)
        except OSError as exc:
            self._log(f"kv cache could not quarantine {name} ({why}): {exc.strerror}")
            return False
        finally:
            os.close(root_fd)
        return True

    def _trim(self, qfd: int) -> None:
        """Remove all but the newest KEEP quarantined files (names sort by time)."""
        try:
            names = sorted(n for n in os.listdir(qfd) if _KEPT_NAME.fullmatch(n))
        except OSError as exc:
            self._log(f"kv cache could not list {DIRECTORY}/: {exc.strerror}")
            return
        for name in names[: max(0, len(names) - KEEP)]:
            try:
                if stat.S_ISREG(os.lstat(name, dir_fd=qfd).st_mode):
                    os.unlink(name, dir_fd=qfd)
                    self._log(f"kv cache removed {DIRECTORY}/{name}: only {KEEP} are kept")
            except OSError as exc:
                self._log(f"kv cache could not remove {DIRECTORY}/{name}: {exc.strerror}")


# --- Bytes held, for /metrics ---------------------------------------------------------
# How many bytes the disk KV cache holds, for the /metrics gauge.
#
# Read at every scrape from another thread than the inference worker's, which owns the
# KVStore; so this only lists the directory and stats the checkpoint names (40 hex
# digits + `.kv`, docs/reference/formats.md §9), without opening or verifying any file
# and without touching the store's state. Links are not followed (ADR 0006); temp files
# of a write in progress and the quarantine are not counted, as the budget does not
# count them either.


def kv_files_bytes(directory: str | os.PathLike[str]) -> int:
    total = 0
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if parse_cache_name(entry.name) is None:
                    continue
                try:
                    if entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
                except OSError:
                    continue  # deleted (evicted) between listing and stat
    except OSError:
        return total  # the directory is gone or unreadable: nothing to count
    return total
