"""Damaged `.kv` files, moved aside instead of deleted (docs/adr/0007-kv-file-integrity.md).

A file that fails its checks is renamed into `<cache dir>/quarantine/` as
`<20-digit ns timestamp>-<name>`, with a log line, so an operator can look at it; the
cache never lists that directory. Only the newest KEEP files stay there, so a failing
disk cannot fill itself up. Every step goes through directory descriptors opened with
O_NOFOLLOW: a symlink planted as `quarantine` is never followed.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from collections.abc import Callable

Log = Callable[[str], None]
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
