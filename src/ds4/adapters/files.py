"""Atomic file writes (temp file in the same directory, fsync, rename) and bounded reads."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def atomic_write(path: Path) -> Iterator[BinaryIO]:
    """Yield a binary handle; the file appears at `path` only if the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_limited(path: str | os.PathLike[str], limit: int) -> bytes:
    """The whole of a regular file of at most `limit` bytes.

    Checked before reading, so a device (/dev/zero never ends), a pipe or a huge file
    costs nothing: OSError(EINVAL / EFBIG) with a message naming what it is instead.
    """
    # O_NONBLOCK: opening a FIFO must not wait for a writer.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file")
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1) if info.st_size <= limit else b""
        if info.st_size > limit or len(data) > limit:  # (or it grew while being read)
            size = max(info.st_size, len(data))
            raise OSError(errno.EFBIG, f"{size} bytes, over the limit of {limit}")
        return data
