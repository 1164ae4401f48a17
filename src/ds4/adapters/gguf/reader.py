"""GGUFFile: the ModelFile port over a read-only mmap of a GGUF file."""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
from collections.abc import Mapping
from types import MappingProxyType, TracebackType

import numpy as np
import numpy.typing as npt

from ds4.adapters.gguf.parser import GGUFFormatError, parse_gguf
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY
from ds4.domain.gguf.records import MetaValue, TensorInfo


class GGUFFile:
    """A GGUF file mapped read-only; tensors are zero-copy views into the mapping."""

    def __init__(self, path: str | os.PathLike[str], *, prefetch: bool = False) -> None:
        self._path = str(path)
        try:
            # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
            fd = os.open(self._path, os.O_RDONLY | os.O_NONBLOCK)
        except IsADirectoryError:
            raise GGUFFormatError(f"{self._path} is a directory, not a GGUF file") from None
        except OSError as exc:
            raise GGUFFormatError(f"cannot open {self._path}: {exc.strerror}") from None
        try:
            self._map = self._map_regular_file(fd)
        finally:
            os.close(fd)
        size = len(self._map)
        self._size = size
        view = memoryview(self._map)
        problem = None
        try:
            parsed = parse_gguf(view, size)
        except GGUFFormatError as exc:
            problem = str(exc)
        finally:
            view.release()  # lets the mapping close even while a traceback holds the view
        if problem is not None:
            self._map.close()
            raise GGUFFormatError(f"{self._path}: {problem}")
        self._version = parsed.version
        self._alignment = parsed.alignment
        self._metadata = MappingProxyType(parsed.metadata)
        self._tensors = MappingProxyType(parsed.tensors)
        if prefetch and hasattr(self._map, "madvise"):
            self._map.madvise(mmap.MADV_WILLNEED)

    def _map_regular_file(self, fd: int) -> mmap.mmap:
        """Only a regular file has a size to check counts against; a device such as
        /dev/zero (size 0, endless bytes) or a pipe is refused before any read."""
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise GGUFFormatError(f"{self._path} is a directory, not a GGUF file")
        if not stat.S_ISREG(info.st_mode):
            raise GGUFFormatError(f"{self._path}: not a regular file ({_file_kind(info.st_mode)})")
        if info.st_size == 0:
            raise GGUFFormatError(f"{self._path}: file is empty")
        return mmap.mmap(fd, info.st_size, access=mmap.ACCESS_READ)

    # ---- ModelFile port -------------------------------------------------

    @property
    def path(self) -> str:
        return self._path

    @property
    def version(self) -> int:
        return self._version

    @property
    def alignment(self) -> int:
        return self._alignment

    @property
    def file_size(self) -> int:
        return self._size

    @property
    def metadata(self) -> Mapping[str, MetaValue]:
        return self._metadata

    @property
    def tensors(self) -> Mapping[str, TensorInfo]:
        return self._tensors

    def raw(self, name: str) -> npt.NDArray[np.uint8]:
        info = self._tensor(name)
        flat = np.frombuffer(self._map, dtype=np.uint8, count=info.nbytes, offset=info.offset)
        geo = BLOCK_GEOMETRY[info.ggml_type]
        row_bytes = info.dims[0] // geo.elements * geo.nbytes
        return flat.reshape((*info.numpy_shape[:-1], row_bytes))

    def close(self) -> None:
        # While tensor views are alive the mapping stays; it goes when they do.
        with contextlib.suppress(BufferError):
            self._map.close()

    # ---- helpers ----------------------------------------------------------

    def _tensor(self, name: str) -> TensorInfo:
        try:
            return self._tensors[name]
        except KeyError:
            raise GGUFFormatError(f"{self._path}: no tensor named {name!r}") from None

    def __enter__(self) -> GGUFFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a pipe"), (stat.S_ISSOCK, "a socket"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "not a file")
