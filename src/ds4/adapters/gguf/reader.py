"""Reading a GGUF: bounds-checked parsing of the header, metadata and tensor directory,
and GGUFFile, the ModelFile port over a read-only mmap of the file.

Every count, length, offset and size is checked against the bytes that are actually
there before it is used, so a truncated or corrupt file produces one GGUFFormatError
naming the problem, never a huge allocation or a hang.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import stat
import struct
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType, TracebackType

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType, tensor_nbytes, type_name
from ds4.domain.gguf.records import (
    SCALAR_SIZES,
    STRUCT_CODES,
    MetaValue,
    PackedArray,
    StringArray,
    TensorInfo,
    ValueType,
    decode_gguf_string,
)

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSION = 3
DEFAULT_ALIGNMENT = 32
MAX_ARRAY_DEPTH = 8
MAX_TENSOR_DIMS = 8
HEADER_SIZE = 24  # magic, version, tensor count, kv count
MIN_FILE_SIZE = 32
# Record counts ds4 will turn into Python objects (docs/adr/0004-gguf-validation.md):
# each costs ~10-20x its bytes on disk, so a small file could otherwise ask for
# gigabytes. Flash has ~60 keys, 1328 tensors and 257k tokenizer strings.
MAX_METADATA_KEYS = 1 << 16
MAX_TENSORS = 1 << 16
MAX_STRING_ITEMS = 1 << 24  # items of string arrays, whole file
MAX_NESTED_ARRAYS = 1 << 16  # arrays inside arrays, whole file

# Smallest possible encodings, used to reject absurd counts before looping.
_MIN_KV_RECORD = 8 + 4 + 1  # empty key, type, 1-byte value
_MIN_TENSOR_RECORD = 8 + 4 + 8 + 4 + 8  # empty name, n_dims, one dim, type, offset

# numpy dtypes of the fixed-size array items (bools are bytes, nonzero = true)
_ITEM_DTYPES: dict[ValueType, str] = {
    ValueType.UINT8: "<u1", ValueType.INT8: "<i1", ValueType.UINT16: "<u2",
    ValueType.INT16: "<i2", ValueType.UINT32: "<u4", ValueType.INT32: "<i4",
    ValueType.FLOAT32: "<f4", ValueType.BOOL: "<u1", ValueType.UINT64: "<u8",
    ValueType.INT64: "<i8", ValueType.FLOAT64: "<f8",
}  # fmt: skip
_U64 = struct.Struct("<Q")


class GGUFFormatError(Ds4Error):
    """The file is not a well-formed GGUF v3 file; the message says where and why."""


@dataclass(frozen=True)
class ParsedGGUF:
    version: int
    alignment: int
    metadata: dict[str, MetaValue]
    tensors: dict[str, TensorInfo]
    data_start: int


class _Cursor:
    """Reads little-endian fields from a buffer, refusing to run past its end."""

    def __init__(self, buf: memoryview, size: int) -> None:
        self.buf = buf
        self.size = size
        self.pos = 0

    def remaining(self) -> int:
        return self.size - self.pos

    def need(self, n: int, what: str) -> None:
        if n > self.remaining():
            raise GGUFFormatError(
                f"truncated file: {what} needs {n} bytes at offset {self.pos}, "
                f"only {self.remaining()} left"
            )

    def scalar(self, vtype: ValueType, what: str) -> int | float | bool:
        if vtype is ValueType.BOOL:
            self.need(1, what)
            value = self.buf[self.pos] != 0
            self.pos += 1
            return value
        fmt = "<" + STRUCT_CODES[vtype]
        n = SCALAR_SIZES[vtype]
        self.need(n, what)
        (result,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return result  # type: ignore[no-any-return]

    def u32(self, what: str) -> int:
        return int(self.scalar(ValueType.UINT32, what))

    def u64(self, what: str) -> int:
        return int(self.scalar(ValueType.UINT64, what))

    def string(self, what: str) -> str:
        length = self.u64(f"{what} length")
        self.need(length, what)
        raw = bytes(self.buf[self.pos : self.pos + length])
        self.pos += length
        return decode_gguf_string(raw)


class _Budget:
    """What is left of the per-file allowance of string items and nested arrays."""

    def __init__(self) -> None:
        self.strings = MAX_STRING_ITEMS
        self.nested = MAX_NESTED_ARRAYS

    def spend_strings(self, n: int, what: str) -> None:
        self.strings -= n
        if self.strings < 0:
            raise GGUFFormatError(
                f"{what}: more than {MAX_STRING_ITEMS} string array items in the file"
            )

    def spend_nested(self, n: int, what: str) -> None:
        self.nested -= n
        if self.nested < 0:
            raise GGUFFormatError(
                f"{what}: more than {MAX_NESTED_ARRAYS} nested arrays in the file"
            )


def _value_type(code: int, what: str) -> ValueType:
    try:
        return ValueType(code)
    except ValueError:
        raise GGUFFormatError(f"{what}: unknown metadata value type {code}") from None


def _read_value(
    cur: _Cursor, vtype: ValueType, what: str, depth: int, budget: _Budget
) -> MetaValue:
    if vtype is ValueType.STRING:
        return MetaValue(vtype, cur.string(what))
    if vtype is not ValueType.ARRAY:
        return MetaValue(vtype, cur.scalar(vtype, what))
    if depth >= MAX_ARRAY_DEPTH:
        raise GGUFFormatError(f"{what}: arrays nested deeper than {MAX_ARRAY_DEPTH}")
    item_type = _value_type(cur.u32(f"{what} item type"), what)
    count = cur.u64(f"{what} item count")
    min_item = SCALAR_SIZES.get(item_type, 8 if item_type is ValueType.STRING else 12)
    if count * min_item > cur.remaining():
        raise GGUFFormatError(
            f"{what}: array of {count} {item_type.name.lower()} items cannot fit in the "
            f"{cur.remaining()} bytes left"
        )
    if item_type in _ITEM_DTYPES:
        return MetaValue(ValueType.ARRAY, _packed_array(cur, item_type, count), item_type)
    if item_type is ValueType.STRING:
        budget.spend_strings(count, what)
        return MetaValue(ValueType.ARRAY, _string_array(cur, count, what), item_type)
    budget.spend_nested(count, what)
    items = [
        _read_value(cur, item_type, f"{what}[{i}]", depth + 1, budget).value for i in range(count)
    ]
    return MetaValue(ValueType.ARRAY, items, item_type)


def _packed_array(cur: _Cursor, item_type: ValueType, count: int) -> PackedArray:
    """A copy of the packed items (the caller has checked they fit)."""
    dtype = np.dtype(_ITEM_DTYPES[item_type])
    items = np.frombuffer(cur.buf, dtype=dtype, count=count, offset=cur.pos).copy()
    cur.pos += count * dtype.itemsize
    return PackedArray(items != 0 if item_type is ValueType.BOOL else items)


def _string_array(cur: _Cursor, count: int, what: str) -> StringArray:
    """The string records copied as they are, with the offset of each (8 bytes an item)."""
    first, pos, size, buf = cur.pos, cur.pos, cur.size, cur.buf
    starts = array("q")
    for i in range(count):
        if pos + 8 > size:
            cur.pos = pos
            cur.need(8, f"{what}[{i}] length")
        (length,) = _U64.unpack_from(buf, pos)
        starts.append(pos - first)
        if length > size - pos - 8:
            cur.pos = pos + 8
            cur.need(length, f"{what}[{i}]")
        pos += 8 + length
    starts.append(pos - first)
    cur.pos = pos
    return StringArray(bytes(buf[first:pos]), np.frombuffer(starts, dtype=np.int64))


def _alignment(metadata: dict[str, MetaValue]) -> int:
    entry = metadata.get("general.alignment")
    if entry is None:
        return DEFAULT_ALIGNMENT
    if entry.vtype is not ValueType.UINT32:
        raise GGUFFormatError(f"general.alignment is stored as {entry.describe_type()}, not u32")
    value = int(entry.value)  # type: ignore[arg-type]
    if value == 0 or value & (value - 1) != 0:
        raise GGUFFormatError(f"general.alignment is {value}, not a power of two")
    return value


def _read_tensor_record(cur: _Cursor, index: int) -> tuple[str, tuple[int, ...], GGMLType, int]:
    what = f"tensor record {index}"
    name = cur.string(f"{what} name")
    what = f"tensor {name!r}"
    n_dims = cur.u32(f"{what} dimension count")
    if not 1 <= n_dims <= MAX_TENSOR_DIMS:
        raise GGUFFormatError(f"{what}: {n_dims} dimensions (allowed 1..{MAX_TENSOR_DIMS})")
    dims = tuple(cur.u64(f"{what} dim {i}") for i in range(n_dims))
    code = cur.u32(f"{what} type")
    try:
        ggml_type = GGMLType(code)
    except ValueError:
        raise GGUFFormatError(f"{what}: unknown tensor type {code}") from None
    offset = cur.u64(f"{what} offset")
    return name, dims, ggml_type, offset


def _check_tensor_extent(
    name: str, dims: tuple[int, ...], ggml_type: GGMLType, rel: int, data_start: int, size: int
) -> tuple[int, int]:
    """Validate one tensor's geometry and extent; return (absolute offset, byte size)."""
    geo = BLOCK_GEOMETRY[ggml_type]
    if dims[0] % geo.elements != 0:
        raise GGUFFormatError(
            f"tensor {name!r}: row length {dims[0]} is not a multiple of the "
            f"{type_name(ggml_type)} block size {geo.elements}"
        )
    n_elements = 1
    for dim in dims:
        n_elements *= dim
        if n_elements * geo.nbytes > size * geo.elements:  # early exit, avoids huge products
            raise GGUFFormatError(
                f"tensor {name!r}: dims {list(dims)} of {type_name(ggml_type)} "
                f"exceed the file size {size}"
            )
    nbytes = tensor_nbytes(ggml_type, n_elements)
    start = data_start + rel
    if start + nbytes > size:
        raise GGUFFormatError(
            f"tensor {name!r}: data [{start}, {start + nbytes}) runs past the end of the "
            f"file ({size} bytes)"
        )
    return start, nbytes


def parse_gguf(buf: memoryview, size: int) -> ParsedGGUF:
    """Parse the header, metadata and tensor directory of a GGUF v3 file in `buf`."""
    if size < MIN_FILE_SIZE:
        raise GGUFFormatError(f"file is {size} bytes, too small to be GGUF")
    if bytes(buf[:4]) != GGUF_MAGIC:
        raise GGUFFormatError(f"bad magic {bytes(buf[:4])!r}, expected b'GGUF'")
    cur = _Cursor(buf, size)
    cur.pos = 4
    version = cur.u32("version")
    if version != SUPPORTED_VERSION:
        raise GGUFFormatError(f"GGUF version {version} is not supported (need 3)")
    n_tensors = cur.u64("tensor count")
    n_kv = cur.u64("metadata count")
    if n_kv > MAX_METADATA_KEYS:
        raise GGUFFormatError(f"metadata count {n_kv} is over the limit of {MAX_METADATA_KEYS}")
    if n_tensors > MAX_TENSORS:
        raise GGUFFormatError(f"tensor count {n_tensors} is over the limit of {MAX_TENSORS}")
    if n_kv * _MIN_KV_RECORD > cur.remaining():
        raise GGUFFormatError(f"metadata count {n_kv} cannot fit in a {size}-byte file")
    if n_tensors * _MIN_TENSOR_RECORD > cur.remaining():
        raise GGUFFormatError(f"tensor count {n_tensors} cannot fit in a {size}-byte file")

    metadata: dict[str, MetaValue] = {}
    budget = _Budget()
    for i in range(n_kv):
        key = cur.string(f"metadata key {i}")
        vtype = _value_type(cur.u32(f"metadata {key!r} type"), f"metadata {key!r}")
        value = _read_value(cur, vtype, f"metadata {key!r}", 0, budget)
        if key in metadata:
            raise GGUFFormatError(f"metadata key {key!r} appears twice")
        metadata[key] = value
    alignment = _alignment(metadata)

    records = [_read_tensor_record(cur, i) for i in range(n_tensors)]
    data_start = -(-cur.pos // alignment) * alignment
    if data_start > size:
        raise GGUFFormatError(f"data section starts at {data_start}, past the end ({size} bytes)")

    tensors: dict[str, TensorInfo] = {}
    for name, dims, ggml_type, rel in records:
        if name in tensors:
            raise GGUFFormatError(f"tensor {name!r} appears twice")
        if rel % alignment != 0:
            raise GGUFFormatError(
                f"tensor {name!r}: offset {rel} is not a multiple of the alignment {alignment}"
            )
        start, nbytes = _check_tensor_extent(name, dims, ggml_type, rel, data_start, size)
        tensors[name] = TensorInfo(name, dims, ggml_type, start, nbytes)
    _check_no_overlap(tensors)
    return ParsedGGUF(version, alignment, metadata, tensors, data_start)


def _check_no_overlap(tensors: dict[str, TensorInfo]) -> None:
    ordered = sorted((t for t in tensors.values() if t.nbytes), key=lambda t: t.offset)
    for before, after in itertools.pairwise(ordered):
        if before.offset + before.nbytes > after.offset:
            raise GGUFFormatError(f"tensors {before.name!r} and {after.name!r} overlap")


# --- GGUFFile: the ModelFile port over a read-only mmap of a GGUF file.
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
