"""Quantizer: float32 rows to GGML block bytes (docs/reference/formats.md §4, §6)."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from ds4.domain.gguf.ggml_types import GGMLType


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
