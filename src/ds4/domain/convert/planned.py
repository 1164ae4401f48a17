"""Value types shared by the model generators and the GGUF model writer."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.gguf.ggml_types import GGMLType

Values = npt.NDArray[np.float32] | npt.NDArray[np.int32]


@dataclass(frozen=True)
class PlannedTensor:
    name: str
    dims: tuple[int, ...]  # GGUF order
    ggml_type: GGMLType

    @property
    def numpy_shape(self) -> tuple[int, ...]:
        return tuple(reversed(self.dims))


@dataclass(frozen=True)
class Chunk:
    values: Values  # leading-axis rows of the tensor, in order
    importance: npt.NDArray[np.float32] | None = None  # per column, for the quantizer
