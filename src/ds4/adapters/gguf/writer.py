"""Writing a GGUF: the streaming GGUF v3 writer, metadata and directory first, then
tensor by tensor, and the whole-model writer that feeds it each tensor in row chunks.

Memory stays bounded by the largest single tensor the caller hands in. The file is
written to a temporary name and renamed into place only when every tensor has been
written, so a crash or a bad tensor never leaves a half-written model behind.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from ds4.adapters.gguf.reader import DEFAULT_ALIGNMENT, GGUF_MAGIC, SUPPORTED_VERSION
from ds4.domain.convert.plan import Chunk, PlannedTensor
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType, tensor_nbytes, type_name
from ds4.domain.gguf.records import STRUCT_CODES, ArrayValue, MetaValue, Value, ValueType
from ds4.ports.model_file import Quantizer


class GGUFWriteError(Ds4Error):
    """The caller asked the writer for something that would make a bad file."""


def _encode_string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _encode_value(vtype: ValueType, value: Value, item_type: ValueType | None) -> bytes:
    if vtype is ValueType.STRING:
        assert isinstance(value, str)
        return _encode_string(value)
    if vtype is ValueType.ARRAY:
        # a list built in code, or an array read from another file (ArrayValue)
        assert isinstance(value, list | ArrayValue) and item_type is not None
        head = struct.pack("<IQ", item_type, len(value))
        if item_type in STRUCT_CODES:
            return head + struct.pack("<" + str(len(value)) + STRUCT_CODES[item_type], *value)
        if item_type is ValueType.STRING:
            return head + b"".join(_encode_string(str(v)) for v in value)
        raise GGUFWriteError("nested metadata arrays are not written by ds4")
    return struct.pack("<" + STRUCT_CODES[vtype], value)


def encode_metadata(key: str, meta: MetaValue) -> bytes:
    return (
        _encode_string(key)
        + struct.pack("<I", meta.vtype)
        + _encode_value(meta.vtype, meta.value, meta.item_type)
    )


class GGUFWriter:
    """Write a GGUF file: add metadata and tensor records, then stream tensor data."""

    def __init__(self, path: str | os.PathLike[str], *, alignment: int = DEFAULT_ALIGNMENT):
        if alignment <= 0 or alignment & (alignment - 1):
            raise GGUFWriteError(f"alignment {alignment} is not a power of two")
        self.path = Path(path)
        self.alignment = alignment
        self._metadata: dict[str, MetaValue] = {}
        self._tensors: list[tuple[str, tuple[int, ...], GGMLType, int, int]] = []
        self._next_offset = 0
        self._next_tensor = 0
        self._tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self._file: BinaryIO | None = None
        if alignment != DEFAULT_ALIGNMENT:
            self.add_metadata("general.alignment", MetaValue(ValueType.UINT32, alignment))

    # ---- planning ---------------------------------------------------------

    def add_metadata(self, key: str, value: MetaValue) -> None:
        if self._file is not None:
            raise GGUFWriteError("metadata must be added before the data is written")
        if key in self._metadata:
            raise GGUFWriteError(f"metadata key {key!r} added twice")
        self._metadata[key] = value

    def add_tensor(self, name: str, dims: tuple[int, ...], ggml_type: GGMLType) -> None:
        if self._file is not None:
            raise GGUFWriteError("tensors must be declared before the data is written")
        if any(t[0] == name for t in self._tensors):
            raise GGUFWriteError(f"tensor {name!r} added twice")
        n_elements = int(np.prod(dims, dtype=np.int64)) if dims else 1
        nbytes = tensor_nbytes(ggml_type, n_elements)
        self._tensors.append((name, tuple(dims), ggml_type, self._next_offset, nbytes))
        self._next_offset += -(-nbytes // self.alignment) * self.alignment

    # ---- writing ----------------------------------------------------------

    def _header_bytes(self) -> bytes:
        parts = [
            GGUF_MAGIC,
            struct.pack("<IQQ", SUPPORTED_VERSION, len(self._tensors), len(self._metadata)),
        ]
        parts += [encode_metadata(k, v) for k, v in self._metadata.items()]
        for name, dims, ggml_type, offset, _ in self._tensors:
            parts.append(_encode_string(name))
            parts.append(struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims))
            parts.append(struct.pack("<IQ", ggml_type, offset))
        header = b"".join(parts)
        return header + b"\0" * (-len(header) % self.alignment)

    def begin_data(self) -> None:
        """Write the header, metadata and directory; tensor data follows in order."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self._tmp.open("wb")
        self._file.write(self._header_bytes())

    def write_tensor(self, name: str, data: npt.NDArray[np.generic] | bytes) -> None:
        """Write the next tensor's bytes (numpy array of any dtype, or raw bytes)."""
        raw = data if isinstance(data, bytes) else np.ascontiguousarray(data).tobytes()
        self.write_tensor_parts(name, [raw])

    def write_tensor_parts(self, name: str, parts: Iterable[bytes]) -> None:
        """Write the next tensor as consecutive byte parts (bounded memory for big ones)."""
        if self._file is None:
            self.begin_data()
        assert self._file is not None
        if self._next_tensor >= len(self._tensors):
            raise GGUFWriteError(f"tensor {name!r} was never declared")
        want, _, ggml_type, _, nbytes = self._tensors[self._next_tensor]
        if name != want:
            raise GGUFWriteError(f"tensor {name!r} written out of order (expected {want!r})")
        written = 0
        for part in parts:
            written += len(part)
            if written > nbytes:
                break
            self._file.write(part)
        if written != nbytes:
            raise GGUFWriteError(
                f"tensor {name!r}: got {'more than ' if written > nbytes else ''}{written} "
                f"bytes, {type_name(ggml_type)} of this shape needs {nbytes}"
            )
        self._file.write(b"\0" * (-nbytes % self.alignment))
        self._next_tensor += 1

    def finish(self, *, sparse: bool = False) -> Path:
        """Make the file complete and move it into place.

        sparse=True skips any unwritten tensor data by extending the file with a
        hole (for full-shape layout tests: the directory is real, the data is not).
        """
        if self._file is None:
            self.begin_data()
        assert self._file is not None
        if self._next_tensor != len(self._tensors):
            if not sparse:
                missing = self._tensors[self._next_tensor][0]
                raise GGUFWriteError(f"tensor {missing!r} and later ones were never written")
            header = len(self._header_bytes())
            self._file.truncate(header + self._next_offset)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None
        self._tmp.replace(self.path)
        return self.path

    def abort(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> GGUFWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None or self._file is not None:
            self.abort()


# --- Write a whole model GGUF tensor by tensor, each tensor in row chunks.
# A producer yields chunks of leading-axis rows (an expert's matrix, a band of rows);
# each is encoded and written before the next is made, so peak memory is one chunk,
# whatever the model size. Quantizers work row by row, so chunking changes no byte.
Producer = Callable[[PlannedTensor], Iterable[Chunk]]
Progress = Callable[[PlannedTensor], None]


def encode_chunk(plan: PlannedTensor, chunk: Chunk, quantizer: Quantizer) -> bytes:
    values = chunk.values
    if plan.ggml_type is GGMLType.I32:
        if not np.issubdtype(values.dtype, np.integer):
            raise Ds4Error(f"{plan.name}: I32 tensor needs integer values, got {values.dtype}")
        return values.astype("<i4").tobytes()
    if chunk.encoded is not None:
        want = tensor_nbytes(plan.ggml_type, values.size)
        if chunk.encoded.nbytes != want:
            raise Ds4Error(f"{plan.name}: {chunk.encoded.nbytes} encoded bytes, expected {want}")
        return chunk.encoded.tobytes()
    floats = np.ascontiguousarray(values, dtype=np.float32)
    if not np.isfinite(floats).all():
        raise Ds4Error(f"{plan.name}: contains NaN or infinite values")
    return quantizer.quantize(floats, plan.ggml_type, chunk.importance).tobytes()


def _chunks_in_shape(plan: PlannedTensor, chunks: Iterable[Chunk]) -> Iterable[Chunk]:
    """Check that the chunks tile the planned shape exactly, as they go by."""
    shape = plan.numpy_shape
    rows = 0
    for chunk in chunks:
        got = chunk.values.shape
        whole = len(shape) == 1 and got == shape
        if not whole and (len(got) != len(shape) or got[1:] != shape[1:]):
            raise Ds4Error(f"{plan.name}: chunk of shape {got} does not fit {shape}")
        rows += shape[0] if whole else got[0]
        yield chunk
    if rows != shape[0]:
        raise Ds4Error(f"{plan.name}: produced {rows} rows, expected {shape[0]}")


def write_model(
    path: Path,
    metadata: Mapping[str, MetaValue],
    plans: Iterable[PlannedTensor],
    produce: Producer,
    quantizer: Quantizer,
    *,
    progress: Progress | None = None,
) -> Path:
    """Write `plans` in order; the file appears at `path` only when complete."""
    plans = list(plans)
    writer = GGUFWriter(path)
    for key, value in metadata.items():
        writer.add_metadata(key, value)
    for plan in plans:
        writer.add_tensor(plan.name, plan.dims, plan.ggml_type)
    with writer:
        writer.begin_data()
        for plan in plans:
            parts = (
                encode_chunk(plan, c, quantizer) for c in _chunks_in_shape(plan, produce(plan))
            )
            writer.write_tensor_parts(plan.name, parts)
            if progress is not None:
                progress(plan)
        return writer.finish()
