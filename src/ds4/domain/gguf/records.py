"""Typed GGUF metadata values and tensor directory records (docs/reference/formats.md
§2.1–2.3), with the compact metadata arrays they hold.

Compact arrays: memory proportional to the array's bytes in the file. A Python list of
N small ints costs 8 bytes a reference plus up to 28 bytes an object, 16-25x a u8 or
u32 array on disk (docs/adr/0004-gguf-validation.md). ArrayValue and its kinds keep the
packed values and make Python objects only for the items a caller reads. They behave
as read-only sequences that compare equal to lists and print like them, so a model's
identity digest (which hashes `repr(value)`) is the same as with lists.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar, overload

import numpy as np
import numpy.typing as npt

from ds4.domain.gguf.ggml_types import GGMLType

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


# --- Typed GGUF metadata values and tensor directory records (docs/reference/formats.md §2.1–2.3).
class ValueType(IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


SCALAR_SIZES: dict[ValueType, int] = {
    ValueType.UINT8: 1,
    ValueType.INT8: 1,
    ValueType.UINT16: 2,
    ValueType.INT16: 2,
    ValueType.UINT32: 4,
    ValueType.INT32: 4,
    ValueType.FLOAT32: 4,
    ValueType.BOOL: 1,
    ValueType.UINT64: 8,
    ValueType.INT64: 8,
    ValueType.FLOAT64: 8,
}

# struct format codes of the fixed-size value types (all little-endian on disk).
STRUCT_CODES: dict[ValueType, str] = {
    ValueType.UINT8: "B",
    ValueType.INT8: "b",
    ValueType.UINT16: "H",
    ValueType.INT16: "h",
    ValueType.UINT32: "I",
    ValueType.INT32: "i",
    ValueType.FLOAT32: "f",
    ValueType.BOOL: "?",
    ValueType.UINT64: "Q",
    ValueType.INT64: "q",
    ValueType.FLOAT64: "d",
}

INTEGER_TYPES = frozenset(
    {
        ValueType.UINT8,
        ValueType.INT8,
        ValueType.UINT16,
        ValueType.INT16,
        ValueType.UINT32,
        ValueType.INT32,
        ValueType.UINT64,
        ValueType.INT64,
    }
)
FLOAT_TYPES = frozenset({ValueType.FLOAT32, ValueType.FLOAT64})

Scalar = int | float | bool | str
# Arrays built in code are lists; arrays read from a file are compact ArrayValues
# (nested arrays: a list of them). Read either through MetaValue.items().
Value = Scalar | list[Any] | ArrayValue[Any]


@dataclass(frozen=True)
class MetaValue:
    """One metadata value with the type it was stored as.

    `item_type` is set for arrays (the element type); nested arrays hold lists.
    """

    vtype: ValueType
    value: Value
    item_type: ValueType | None = None

    def items(self) -> Sequence[Any] | None:
        """The array's items (a list or an ArrayValue); None for a scalar or string."""
        if self.vtype is ValueType.ARRAY and isinstance(self.value, list | ArrayValue):
            return self.value
        return None

    def describe_type(self) -> str:
        if self.vtype is ValueType.ARRAY and self.item_type is not None:
            return f"array[{self.item_type.name.lower()}]"
        return self.vtype.name.lower()


@dataclass(frozen=True)
class TensorInfo:
    """One tensor directory entry. dims are GGUF order: dims[0] varies fastest."""

    name: str
    dims: tuple[int, ...]
    ggml_type: GGMLType
    offset: int  # absolute byte offset in the file
    nbytes: int

    @property
    def n_elements(self) -> int:
        return math.prod(self.dims)

    @property
    def numpy_shape(self) -> tuple[int, ...]:
        """Shape in numpy (row-major) orientation: reversed GGUF dims."""
        return tuple(reversed(self.dims))


def meta_u32(value: int) -> MetaValue:
    return MetaValue(ValueType.UINT32, value)


def meta_u64(value: int) -> MetaValue:
    return MetaValue(ValueType.UINT64, value)


def meta_f32(value: float) -> MetaValue:
    return MetaValue(ValueType.FLOAT32, value)


def meta_bool(value: bool) -> MetaValue:
    return MetaValue(ValueType.BOOL, value)


def meta_str(value: str) -> MetaValue:
    return MetaValue(ValueType.STRING, value)


def meta_array(item_type: ValueType, values: list[Value]) -> MetaValue:
    return MetaValue(ValueType.ARRAY, values, item_type)
