"""A checkpoint directory of .safetensors files, memory-mapped and bounds-checked.

The format is an 8-byte little-endian header length, a JSON header mapping tensor
names to dtype/shape/[begin, end) offsets, then the data. Nothing is read until a
tensor is asked for, so converting a 280B-parameter checkpoint maps it, not loads it.
"""

from __future__ import annotations

import contextlib
import json
import math
import mmap
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import Ds4Error
from ds4.ports.model_file import CheckpointTensor

MAX_HEADER = 100 * 2**20

DTYPES: dict[str, np.dtype[Any]] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # raw bits; widened by the converter
    "F8_E4M3": np.dtype("u1"),
    "F8_E5M2": np.dtype("u1"),
    "F8_E8M0": np.dtype("u1"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}


class CheckpointError(Ds4Error):
    """The checkpoint directory or one of its files is unusable; the message says why."""


class _File:
    def __init__(self, path: Path) -> None:
        self.path = path
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < 8:
                raise CheckpointError(f"{path}: too small to be safetensors")
            self.map = mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ)
        n = int.from_bytes(self.map[:8], "little")
        if n > min(MAX_HEADER, size - 8):
            raise CheckpointError(f"{path}: header length {n} is impossible for a {size}-byte file")
        try:
            header = json.loads(self.map[8 : 8 + n])
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CheckpointError(f"{path}: header is not JSON ({exc})") from None
        if not isinstance(header, dict):
            raise CheckpointError(f"{path}: header is not a JSON object")
        self.data_start = 8 + n
        self.entries: dict[str, tuple[CheckpointTensor, int, int]] = {}
        for name, entry in header.items():
            if name != "__metadata__":
                self.entries[name] = self._entry(name, entry, size)

    def _entry(self, name: str, entry: Any, size: int) -> tuple[CheckpointTensor, int, int]:
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            shape = tuple(int(d) for d in shape)
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{self.path}: tensor {name!r} has a malformed entry") from None
        if dtype not in DTYPES:
            raise CheckpointError(f"{self.path}: tensor {name!r} has unsupported dtype {dtype}")
        nbytes = math.prod(shape) * DTYPES[dtype].itemsize
        if any(d < 0 for d in shape) or not 0 <= begin <= end or end - begin != nbytes:
            raise CheckpointError(f"{self.path}: tensor {name!r} offsets do not match its shape")
        if self.data_start + end > size:
            raise CheckpointError(f"{self.path}: tensor {name!r} runs past the end of the file")
        return CheckpointTensor(name, dtype, shape), self.data_start + begin, nbytes


class SafetensorsCheckpoint:
    """The Checkpoint port over a directory with config.json and *.safetensors files."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        root = Path(directory)
        if not root.is_dir():
            raise CheckpointError(f"{root} is not a directory")
        try:
            self._config = json.loads((root / "config.json").read_text(encoding="utf-8"))
        except OSError as exc:
            raise CheckpointError(f"{root}/config.json: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise CheckpointError(f"{root}/config.json is not JSON ({exc})") from None
        files = sorted(root.glob("*.safetensors"))
        if not files:
            raise CheckpointError(f"{root} has no .safetensors files")
        self._files = [_File(p) for p in files]
        self._where: dict[str, _File] = {}
        for f in self._files:
            for name in f.entries:
                if name in self._where:
                    raise CheckpointError(f"tensor {name!r} appears in two files")
                self._where[name] = f
        self._tensors = {n: f.entries[n][0] for n, f in self._where.items()}

    @property
    def config(self) -> Mapping[str, Any]:
        return self._config  # type: ignore[no-any-return]

    @property
    def tensors(self) -> Mapping[str, CheckpointTensor]:
        return self._tensors

    def raw(self, name: str) -> npt.NDArray[np.generic]:
        f = self._where.get(name)
        if f is None:
            raise CheckpointError(f"checkpoint has no tensor {name!r}")
        info, offset, nbytes = f.entries[name]
        dtype = DTYPES[info.dtype]
        flat = np.frombuffer(f.map, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset)
        return flat.reshape(info.shape)

    def close(self) -> None:
        for f in self._files:
            with contextlib.suppress(BufferError):  # views alive: the mapping goes with them
                f.map.close()
