"""ModelFile: a read-only, memory-mapped model container (GGUF)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ds4.domain.gguf.records import MetaValue, TensorInfo


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
