"""Typed GGUF metadata values and tensor directory records (docs/reference/formats.md §2.1–2.3)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ds4.domain.gguf.array_values import ArrayValue
from ds4.domain.gguf.ggml_types import GGMLType


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
