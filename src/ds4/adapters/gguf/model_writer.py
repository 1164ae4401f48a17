"""Write a whole model GGUF tensor by tensor: produce float32 values, encode, stream out.

Peak memory is one tensor's values plus its encoded bytes, whatever the model size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ds4.adapters.gguf.writer import GGUFWriter
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.records import MetaValue
from ds4.ports.quantizer import Quantizer


@dataclass(frozen=True)
class PlannedTensor:
    name: str
    dims: tuple[int, ...]  # GGUF order
    ggml_type: GGMLType

    @property
    def numpy_shape(self) -> tuple[int, ...]:
        return tuple(reversed(self.dims))


Producer = Callable[[PlannedTensor], npt.NDArray[np.float32] | npt.NDArray[np.int32]]
Progress = Callable[[PlannedTensor], None]


def encode_tensor(
    plan: PlannedTensor,
    values: npt.NDArray[np.float32] | npt.NDArray[np.int32],
    quantizer: Quantizer,
    importance: npt.NDArray[np.float32] | None = None,
) -> bytes:
    if values.shape != plan.numpy_shape:
        raise Ds4Error(f"{plan.name}: produced shape {values.shape}, expected {plan.numpy_shape}")
    if plan.ggml_type is GGMLType.I32:
        if not np.issubdtype(values.dtype, np.integer):
            raise Ds4Error(f"{plan.name}: I32 tensor needs integer values, got {values.dtype}")
        info = np.iinfo(np.int32)
        if values.size and (values.min() < info.min or values.max() > info.max):
            raise Ds4Error(f"{plan.name}: values do not fit in int32")
        return values.astype("<i4").tobytes()
    floats = np.ascontiguousarray(values, dtype=np.float32)
    if not np.isfinite(floats).all():
        raise Ds4Error(f"{plan.name}: contains NaN or infinite values")
    return quantizer.quantize(floats, plan.ggml_type, importance).tobytes()


def write_model(
    path: Path,
    metadata: Mapping[str, MetaValue],
    plans: Iterable[PlannedTensor],
    produce: Producer,
    quantizer: Quantizer,
    *,
    progress: Progress | None = None,
    importance: Callable[[PlannedTensor], npt.NDArray[np.float32] | None] | None = None,
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
            weights = importance(plan) if importance is not None else None
            writer.write_tensor(plan.name, encode_tensor(plan, produce(plan), quantizer, weights))
            if progress is not None:
                progress(plan)
        return writer.finish()
