"""Compact GGUF metadata arrays: memory proportional to the array's bytes in the file.

A Python list of N small ints costs 8 bytes a reference plus up to 28 bytes an object,
16-25x a u8 or u32 array on disk (docs/adr/0004-gguf-validation.md). These keep the
packed values and make Python objects only for the items a caller reads. They behave
as read-only sequences that compare equal to lists and print like them, so a model's
identity digest (which hashes `repr(value)`) is the same as with lists.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, overload

import numpy as np
import numpy.typing as npt

T = TypeVar("T")

_CHUNK = 1 << 16  # items turned into Python objects at a time while iterating
_LENGTH_BYTES = 8  # a GGUF string record: u64 byte length, then the bytes


def decode_gguf_string(raw: bytes) -> str:
    """GGUF strings are not validated as UTF-8; bad bytes stay visible as \\xNN."""
    return raw.decode("utf-8", errors="backslashreplace")


class ArrayValue(Sequence[T]):
    """A read-only GGUF array; equal to a list (or another array) of equal items."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]  # unhashable, like the lists it replaces

    def tolist(self) -> list[T]:
        return list(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrayValue | list):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __repr__(self) -> str:
        return repr(self.tolist())


class PackedArray(ArrayValue[Any]):
    """Fixed-size scalars (ints, floats or bools) in one read-only numpy array."""

    __slots__ = ("_items",)

    def __init__(self, items: npt.NDArray[Any]) -> None:
        items.flags.writeable = False
        self._items = items

    def numpy(self) -> npt.NDArray[Any]:
        """The items as a read-only 1-D numpy array (no copy)."""
        return self._items

    def tolist(self) -> list[Any]:
        return list(self._items.tolist())

    def __len__(self) -> int:
        return int(self._items.shape[0])

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return self._items[index].tolist()
        return self._items[index].item()

    def __iter__(self) -> Iterator[Any]:
        for start in range(0, len(self), _CHUNK):
            yield from self._items[start : start + _CHUNK].tolist()


class StringArray(ArrayValue[str]):
    """GGUF string records kept as they are in the file (u64 length + bytes).

    `starts` holds the offset of each record in `records`, plus its end: record i
    spans records[starts[i] : starts[i + 1]]. Items are decoded when read.
    """

    __slots__ = ("_records", "_starts")

    def __init__(self, records: bytes, starts: npt.NDArray[np.int64]) -> None:
        starts.flags.writeable = False
        self._records = records
        self._starts = starts

    def __len__(self) -> int:
        return int(self._starts.shape[0]) - 1

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self._item(i) for i in range(*index.indices(len(self)))]
        n = len(self)
        if not -n <= index < n:
            raise IndexError("string array index out of range")
        return self._item(index % n)

    def _item(self, i: int) -> str:
        start, end = int(self._starts[i]) + _LENGTH_BYTES, int(self._starts[i + 1])
        return decode_gguf_string(self._records[start:end])

    def __iter__(self) -> Iterator[str]:
        records = self._records
        for first in range(0, len(self), _CHUNK):
            bounds = self._starts[first : first + _CHUNK + 1].tolist()
            for start, end in itertools.pairwise(bounds):
                yield decode_gguf_string(records[start + _LENGTH_BYTES : end])
