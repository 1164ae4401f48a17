"""Write a whole model GGUF tensor by tensor, each tensor in row chunks.

A producer yields chunks of leading-axis rows (an expert's matrix, a band of rows);
each is encoded and written before the next is made, so peak memory is one chunk,
whatever the model size. Quantizers work row by row, so chunking changes no byte.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np

from ds4.adapters.gguf.writer import GGUFWriter
from ds4.domain.convert.plan import Chunk, PlannedTensor
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.records import MetaValue
from ds4.ports.model_file import Quantizer

Producer = Callable[[PlannedTensor], Iterable[Chunk]]
Progress = Callable[[PlannedTensor], None]


def encode_chunk(plan: PlannedTensor, chunk: Chunk, quantizer: Quantizer) -> bytes:
    values = chunk.values
    if plan.ggml_type is GGMLType.I32:
        if not np.issubdtype(values.dtype, np.integer):
            raise Ds4Error(f"{plan.name}: I32 tensor needs integer values, got {values.dtype}")
        return values.astype("<i4").tobytes()
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
