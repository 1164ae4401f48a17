"""A directory that refuses writes or reads, as the kernel would, for tests that run as root.

Root ignores permission bits, so `chmod` cannot make a directory read-only or unreadable
for the test suite (CI runs as root). These context managers patch the `os` calls that
reach the directory instead, failing each with the errno a read-only mount (EROFS) or a
directory without read permission (EACCES) gives. Paths passed with a `dir_fd` are
resolved through /proc/self/fd, so calls relative to a directory descriptor count too.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _where(path: Any, dir_fd: int | None) -> Path:
    base = Path(f"/proc/self/fd/{dir_fd}").readlink() if dir_fd is not None else Path.cwd()
    return Path(os.path.abspath(base / os.fsdecode(path)))  # noqa: PTH100 (no symlinks followed)


def _inside(directory: Path, path: Any, dir_fd: int | None = None) -> bool:
    if isinstance(path, int):
        return False  # an fd: its opening was already checked
    where = _where(path, dir_fd)
    return where == directory or directory in where.parents


def _refuse(code: int, path: Any) -> OSError:
    return OSError(code, os.strerror(code), os.fsdecode(path))


@contextmanager
def read_only(monkeypatch: pytest.MonkeyPatch, directory: Path) -> Iterator[None]:
    """Every write under `directory` fails with EROFS; reads work."""
    directory = directory.resolve()
    real_open, real_mkdir = os.open, os.mkdir

    def fake_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if flags & _WRITE_FLAGS and _inside(directory, path, dir_fd):
            raise _refuse(errno.EROFS, path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    def fake_mkdir(path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        if _inside(directory, path, dir_fd):
            exists = _where(path, dir_fd).exists()
            raise _refuse(errno.EEXIST if exists else errno.EROFS, path)
        real_mkdir(path, mode, dir_fd=dir_fd)

    def refusing(real: Callable[..., Any]) -> Callable[..., Any]:
        def fake(path: Any, *args: Any, **kwargs: Any) -> Any:
            fd = kwargs.get("dir_fd", kwargs.get("src_dir_fd"))
            if _inside(directory, path, fd):
                raise _refuse(errno.EROFS, path)
            return real(path, *args, **kwargs)

        return fake

    with monkeypatch.context() as patch:
        patch.setattr(os, "open", fake_open)
        patch.setattr(os, "mkdir", fake_mkdir)
        for name in ("unlink", "remove", "rmdir", "rename", "replace", "link", "symlink"):
            patch.setattr(os, name, refusing(getattr(os, name)))
        yield


@contextmanager
def unreadable(monkeypatch: pytest.MonkeyPatch, directory: Path) -> Iterator[None]:
    """Listing `directory` fails with EACCES."""
    directory = directory.resolve()

    def refusing(real: Callable[..., Any]) -> Callable[..., Any]:
        def fake(path: Any = ".") -> Any:
            if _inside(directory, path) and _where(path, None) == directory:
                raise _refuse(errno.EACCES, path)
            return real(path)

        return fake

    with monkeypatch.context() as patch:
        patch.setattr(os, "listdir", refusing(os.listdir))
        patch.setattr(os, "scandir", refusing(os.scandir))
        yield
