"""Importance-matrix files: llama.cpp's legacy `.dat` format (docs/reference/formats.md §7).

Little-endian layout:

    i32 n_entries
    n_entries x { i32 name_len; name bytes (UTF-8); i32 ncall; i32 nval; f32 values[nval] }
    optional tail: i32 chunks; i32 dataset_len; dataset bytes

Parsing is bounds-checked: a truncated or corrupt file raises Ds4Error naming the
problem and the byte offset. Also here: the lookup rules that pick a tensor's (or an
expert's) importance vector out of a file.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
_I32 = struct.Struct("<i")
_MIN_ENTRY_BYTES = 12  # name_len + ncall + nval with an empty name and no values


@dataclass(frozen=True)
class ImatrixEntry:
    ncall: int
    values: F32  # raw sums as stored; see Imatrix.importance for the per-call mean


@dataclass(frozen=True)
class Imatrix:
    entries: Mapping[str, ImatrixEntry]
    chunks: int | None = None  # tail: number of chunks the statistics came from
    dataset: str | None = None  # tail: the dataset the statistics came from

    def importance(self, name: str) -> F32 | None:
        """The entry's values divided by ncall (when ncall > 0); None if absent."""
        entry = self.entries.get(name)
        if entry is None:
            return None
        if entry.ncall > 0:
            return (entry.values / np.float32(entry.ncall)).astype(np.float32)
        return entry.values.copy()


class _Cursor:
    def __init__(self, data: bytes, source: str) -> None:
        self.data, self.source, self.pos = data, source, 0

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n > self.remaining():
            raise Ds4Error(
                f"{self.source}: truncated at byte {self.pos}: {what} needs {n} bytes, "
                f"{self.remaining()} left"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def i32(self, what: str) -> int:
        value: int = _I32.unpack(self.take(4, what))[0]
        return value

    def count(self, what: str) -> int:
        at = self.pos
        value = self.i32(what)
        if value < 0:
            raise Ds4Error(f"{self.source}: negative {what} ({value}) at byte {at}")
        return value


def parse_imatrix(data: bytes, source: str = "imatrix") -> Imatrix:
    cur = _Cursor(data, source)
    n_entries = cur.count("entry count")
    if n_entries * _MIN_ENTRY_BYTES > cur.remaining():
        raise Ds4Error(
            f"{source}: claims {n_entries} entries but only {cur.remaining()} bytes follow"
        )
    entries: dict[str, ImatrixEntry] = {}
    for index in range(n_entries):
        name = _name(cur, cur.count(f"entry {index} name length"), index)
        ncall = cur.i32(f"entry {name!r} ncall")
        nval = cur.count(f"entry {name!r} value count")
        if nval > cur.remaining() // 4:
            raise Ds4Error(
                f"{source}: truncated in entry {name!r}: {nval} values need {4 * nval} bytes, "
                f"{cur.remaining()} left"
            )
        values = np.frombuffer(cur.take(4 * nval, "values"), dtype="<f4").astype(np.float32)
        if not np.isfinite(values).all():
            raise Ds4Error(f"{source}: entry {name!r} holds a NaN or infinite value")
        if name in entries:
            raise Ds4Error(f"{source}: entry {name!r} appears twice")
        entries[name] = ImatrixEntry(ncall, values)
    if cur.remaining() == 0:
        return Imatrix(entries)
    chunks = cur.i32("tail chunk count")
    dataset_len = cur.count("tail dataset name length")
    dataset = _text(cur.take(dataset_len, "tail dataset name"), source, "dataset name")
    if cur.remaining():
        raise Ds4Error(f"{source}: {cur.remaining()} unexpected bytes after the tail")
    return Imatrix(entries, chunks, dataset)


def _name(cur: _Cursor, length: int, index: int) -> str:
    return _text(cur.take(length, f"entry {index} name"), cur.source, f"entry {index} name")


def _text(raw: bytes, source: str, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Ds4Error(f"{source}: {what} is not valid UTF-8") from exc


def read_imatrix(path: Path) -> Imatrix:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise Ds4Error(f"cannot read imatrix file {path}: {exc.strerror}") from exc
    return parse_imatrix(data, str(path))


def encode_imatrix(imatrix: Imatrix) -> bytes:
    parts = [_I32.pack(len(imatrix.entries))]
    for name, entry in imatrix.entries.items():
        raw = name.encode("utf-8")
        values = np.ascontiguousarray(entry.values, dtype="<f4")
        parts += [_I32.pack(len(raw)), raw, _I32.pack(entry.ncall), _I32.pack(values.size)]
        parts.append(values.tobytes())
    if imatrix.chunks is not None or imatrix.dataset is not None:
        dataset = (imatrix.dataset or "").encode("utf-8")
        parts += [_I32.pack(imatrix.chunks or 0), _I32.pack(len(dataset)), dataset]
    return b"".join(parts)


def write_imatrix(path: Path, imatrix: Imatrix) -> None:
    path.write_bytes(encode_imatrix(imatrix))


def tensor_importance(imatrix: Imatrix, gguf_name: str, hf_name: str, ncols: int) -> F32 | None:
    """A regular tensor's importance: the GGUF name, then the HF name; exactly ncols values."""
    for name in (gguf_name, hf_name):
        values = imatrix.importance(name)
        if values is None:
            continue
        if values.size != ncols:
            raise Ds4Error(f"imatrix entry {name!r} has {values.size} values, expected {ncols}")
        return values
    return None


def expert_importance(
    imatrix: Imatrix, gguf_name: str, hf_name: str, *, expert: int, n_experts: int, ncols: int
) -> F32 | None:
    """Expert `expert` of a routed tensor; the first of the spec's six names that exists.

    A hit holds ncols values (used as is) or ncols * n_experts (the expert's slice).
    """
    names = (
        f"{gguf_name}.expert.{expert}",
        f"{hf_name}.expert.{expert}",
        f"{gguf_name}.expert_{expert}",
        f"{hf_name}.expert_{expert}",
        gguf_name,
        hf_name,
    )
    for name in names:
        values = imatrix.importance(name)
        if values is None:
            continue
        if values.size == ncols:
            return values
        if values.size == ncols * n_experts:
            return values[expert * ncols : (expert + 1) * ncols].copy()
        raise Ds4Error(
            f"imatrix entry {name!r} has {values.size} values, expected {ncols} or "
            f"{ncols} x {n_experts} experts = {ncols * n_experts}"
        )
    return None
