"""Workspace: the files the agent's tools read and write (docs/agent.md "Tools").

Paths are given as the model wrote them, relative to the working directory (the root)
or absolute; `resolve` says where one really points, so the domain can decide whether
it leaves the working directory. Failures are ToolError with the system's reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, Protocol

MAX_FILE_BYTES = 16 << 20  # read whole, at most 16 MiB

EntryKind = Literal["d", "l", "-", "?"]  # directory, symlink, regular file, other


@dataclass(frozen=True)
class DirEntry:
    name: str
    kind: EntryKind
    size: int


@dataclass(frozen=True)
class FileStamp:
    """What says a file changed: its size and modification time."""

    size: int
    mtime_ns: int


class Workspace(Protocol):
    @property
    def root(self) -> str:
        """The working directory, absolute and resolved."""
        ...

    def resolve(self, path: str) -> str:
        """The absolute path `path` names, symlinks resolved (for a file that does not
        exist yet, its parent's)."""
        ...

    def stamp(self, path: str) -> FileStamp | None:
        """Size and mtime of a regular file, None when there is none."""
        ...

    def read(self, path: str) -> bytes:
        """A regular file's bytes (at most MAX_FILE_BYTES: `file too large: <path>
        exceeds 16777216 bytes`)."""
        ...

    def write(self, path: str, data: bytes) -> None:
        """Create or replace a file atomically (temp file in the same directory, then
        rename), keeping an existing file's mode; missing parent directories are made."""
        ...

    def list_dir(self, path: str) -> list[DirEntry]:
        """Entries in directory order, `.` and `..` left out, symlinks not followed."""
        ...

    def walk(self, path: str, max_depth: int) -> Iterator[str]:
        """Regular files under `path` (or `path` itself when it is a file), as paths
        joined onto `path`; `.git` skipped, symlinks never followed."""
        ...
