"""Model weights at rest: the GGUF container the engine runs (ModelFile), the source
checkpoint the converter reads (Checkpoint), and the GGML block codec between a
tensor's bytes and float32 values (Quantizer, Dequantizer)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.records import MetaValue, TensorInfo

# ---- the GGUF container: read-only and memory-mapped ---------------------------------


class ModelFile(Protocol):
    """Metadata, tensor directory and zero-copy tensor bytes of one model file."""

    @property
    def path(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def alignment(self) -> int: ...

    @property
    def file_size(self) -> int: ...

    @property
    def metadata(self) -> Mapping[str, MetaValue]: ...

    @property
    def tensors(self) -> Mapping[str, TensorInfo]: ...

    def raw(self, name: str) -> npt.NDArray[np.uint8]:
        """The tensor's bytes as a read-only uint8 view into the mapping (no copy).

        Shape is (numpy_shape[:-1]..., row_bytes): one row of blocks per last axis.
        """
        ...

    def close(self) -> None: ...


# ---- a source checkpoint directory (config + safetensors) ----------------------------


@dataclass(frozen=True)
class CheckpointTensor:
    name: str
    dtype: str  # safetensors dtype name: F32, BF16, F16, F8_E4M3, F8_E8M0, I8, I32, I64, ...
    shape: tuple[int, ...]


class Checkpoint(Protocol):
    @property
    def config(self) -> Mapping[str, Any]:
        """The parsed config.json."""
        ...

    @property
    def tensors(self) -> Mapping[str, CheckpointTensor]: ...

    def raw(self, name: str) -> npt.NDArray[np.generic]:
        """The tensor as a read-only numpy view (no copy) in its stored dtype.

        BF16 comes back as uint16 bits, FP8 codes as uint8.
        """
        ...

    def close(self) -> None: ...


# ---- the GGML block codec (docs/reference/formats.md §4, §6) -------------------------


class Quantizer(Protocol):
    def quantize(
        self,
        values: npt.NDArray[np.float32],
        ggml_type: GGMLType,
        importance: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.uint8]:
        """Encode `values` (..., row_elements) as `ggml_type` blocks (..., row_bytes).

        `importance` holds one non-negative weight per column (row_elements,), e.g. an
        imatrix entry; block b of every row uses importance[256b : 256b + 256]. Formats
        that ignore it (F32, F16, BF16, Q8_0) accept it and do nothing with it. Without
        it Q2_K/Q4_K take their unweighted ("ref") paths and IQ2_XXS weighs all columns
        equally. Rows are quantized independently: the bytes of a row never depend on
        the other rows passed with it.
        """
        ...


class Dequantizer(Protocol):
    def dequantize(
        self, raw: npt.NDArray[np.uint8], ggml_type: GGMLType
    ) -> npt.NDArray[np.float32]:
        """Decode `raw` (..., row_bytes) into float32 (..., row_elements).

        Leading axes are kept; the last axis goes from bytes to values.
        """
        ...
