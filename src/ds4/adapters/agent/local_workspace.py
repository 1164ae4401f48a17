"""The Workspace port on the local filesystem, rooted at the working directory.

Relative paths are taken from the root; `resolve` follows symlinks so the domain can
tell when a path leaves the root. Writes go to a temp file in the target's directory
and are renamed over it (an existing file keeps its mode; a new one gets the umask's).
Directory walks never follow symlinks and skip `.git`.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from ds4.adapters.files import read_limited
from ds4.domain.agent.tool_catalog import ToolError
from ds4.ports.agent import MAX_FILE_BYTES, DirEntry, EntryKind, FileStamp


def _reason(exc: OSError) -> str:
    return exc.strerror.lower() if exc.strerror else str(exc)


def _kind(mode: int) -> EntryKind:
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISLNK(mode):
        return "l"
    if stat.S_ISREG(mode):
        return "-"
    return "?"


class LocalWorkspace:
    def __init__(self, root: str) -> None:
        self._root = Path(root).resolve()

    @property
    def root(self) -> str:
        return str(self._root)

    def _abs(self, path: str) -> Path:
        return self._root / Path(path).expanduser()

    def resolve(self, path: str) -> str:
        return str(self._abs(path).resolve())

    def stamp(self, path: str) -> FileStamp | None:
        try:
            info = self._abs(path).stat()
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        return FileStamp(info.st_size, info.st_mtime_ns)

    def read(self, path: str) -> bytes:
        try:
            return read_limited(self._abs(path), MAX_FILE_BYTES)
        except OSError as exc:
            if exc.errno == errno.EFBIG:
                raise ToolError(f"file too large: {path} exceeds {MAX_FILE_BYTES} bytes") from None
            raise ToolError(f"cannot read {path}: {_reason(exc)}") from None

    def write(self, path: str, data: bytes) -> None:
        target = Path(self.resolve(path))
        if target.is_dir():
            raise ToolError(f"cannot write {path}: it is a directory")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else None
            tmp = target.with_name(f".{target.name}.tmp.{secrets.token_hex(4)}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                if mode is not None:
                    tmp.chmod(mode)
                tmp.replace(target)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise ToolError(f"cannot write {path}: {_reason(exc)}") from None

    def list_dir(self, path: str) -> list[DirEntry]:
        entries = []
        try:
            with os.scandir(self._abs(path)) as listing:
                for entry in listing:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        entries.append(DirEntry(entry.name, "?", 0))
                        continue
                    entries.append(DirEntry(entry.name, _kind(info.st_mode), info.st_size))
        except OSError as exc:
            raise ToolError(f"opendir failed: {_reason(exc)}") from None
        return entries

    def walk(self, path: str, max_depth: int) -> Iterator[str]:
        try:
            info = self._abs(path).lstat()
        except OSError as exc:
            raise ToolError(f"cannot search {path}: {_reason(exc)}") from None
        if stat.S_ISREG(info.st_mode):
            yield path
        elif stat.S_ISDIR(info.st_mode):
            yield from self._walk_dir(path, max_depth)

    def _walk_dir(self, path: str, depth: int) -> Iterator[str]:
        if depth < 0:
            return
        try:
            with os.scandir(self._abs(path)) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if entry.name == ".git" or entry.is_symlink():
                continue
            child = path.rstrip("/") + "/" + entry.name if path not in ("", ".") else entry.name
            if entry.is_file(follow_symlinks=False):
                yield child
            elif entry.is_dir(follow_symlinks=False):
                yield from self._walk_dir(child, depth - 1)
