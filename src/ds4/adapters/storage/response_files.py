"""The ResponseArchive port on a local directory: `<kv-disk-dir>/responses/<id>.response`
(docs/adr/0069-stored-responses.md).

Names come from the store, which accepts only `resp_` ids of letters, digits, `_` and
`-`, so every path stays inside the directory; it is checked here again. Symlinks are
never followed (O_NOFOLLOW) and nothing blocks on a FIFO (O_NONBLOCK). A write goes to
a temp file, is fsynced, then renamed over the old one, so a crash leaves the old
record or the new, never half of one; leftover temp files are removed at start. The
content (its checksum) is the store's to check.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from ds4.domain.errors import Ds4Error
from ds4.domain.serving.response_store import valid_id

Log = Callable[[str], None]
SUFFIX = ".response"
_TMP_MARK = ".tmp."
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
SUBDIRECTORY = "responses"


class ResponseFiles:
    def __init__(self, directory: str | os.PathLike[str], log: Log = lambda _: None) -> None:
        root = Path(directory)
        try:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise Ds4Error(
                f"cannot create stored responses directory {root}: {exc.strerror}"
            ) from None
        if root.is_symlink() or not root.is_dir():
            raise Ds4Error(f"stored responses path {root} is not a directory")
        self._root = root.resolve()
        self._log = log
        for path in self._root.iterdir():
            if _TMP_MARK in path.name and path.name.endswith(tuple("0123456789")):
                with contextlib.suppress(OSError):
                    path.unlink()

    def _path(self, name: str) -> Path:
        if not valid_id(name):
            raise Ds4Error(f"invalid stored response name {name!r}")
        return self._root / (name + SUFFIX)

    def names(self) -> list[str]:
        out = []
        for path in sorted(self._root.iterdir()):
            name = path.name.removesuffix(SUFFIX)
            if path.name.endswith(SUFFIX) and valid_id(name):
                out.append(name)
        return out

    def read(self, name: str, limit: int) -> bytes | None:
        path = self._path(name)
        try:
            fd = os.open(path, os.O_RDONLY | _OPEN_FLAGS)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._log(f"stored response {name} not readable: {exc.strerror}")
            return None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                self._log(f"stored response {name} skipped: not a regular file")
                return None
            if info.st_size > limit:
                self._log(f"stored response {name} skipped: {info.st_size} bytes, over {limit}")
                return None
            return handle.read(limit + 1)[: limit + 1]

    def write(self, name: str, data: bytes) -> None:
        path = self._path(name)
        tmp = path.with_name(f"{path.name}{_TMP_MARK}{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _OPEN_FLAGS, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            tmp.replace(path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._fsync_dir()

    def delete(self, name: str) -> None:
        path = self._path(name)
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISREG(path.lstat().st_mode):
                return  # not ours to remove
            path.unlink()
            self._fsync_dir()

    def _fsync_dir(self) -> None:
        with contextlib.suppress(OSError):
            fd = os.open(self._root, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
