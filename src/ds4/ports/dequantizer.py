"""Dequantizer: GGML block bytes to float32 values."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from ds4.domain.gguf.ggml_types import GGMLType


class Dequantizer(Protocol):
    def dequantize(
        self, raw: npt.NDArray[np.uint8], ggml_type: GGMLType
    ) -> npt.NDArray[np.float32]:
        """Decode `raw` (..., row_bytes) into float32 (..., row_elements).

        Leading axes are kept; the last axis goes from bytes to values.
        """
        ...
