"""The Dequantizer port in native C (ds4._native_quant), bit-identical to numpy."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4 import _native_quant  # type: ignore[attr-defined]
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, DEQUANTIZABLE, GGMLType

_ffi = _native_quant.ffi
_lib = _native_quant.lib


class NativeDequantizer:
    def dequantize(
        self, raw: npt.NDArray[np.uint8], ggml_type: GGMLType
    ) -> npt.NDArray[np.float32]:
        if ggml_type not in DEQUANTIZABLE:
            raise Ds4Error(f"dequantizing {ggml_type.name} is not supported")
        geo = BLOCK_GEOMETRY[ggml_type]
        lead, row_bytes = raw.shape[:-1], raw.shape[-1]
        if row_bytes % geo.nbytes:
            raise Ds4Error(f"{ggml_type.name}: {row_bytes} bytes is not a whole number of blocks")
        row_elements = row_bytes // geo.nbytes * geo.elements
        src = np.ascontiguousarray(raw)
        out = np.empty((*lead, row_elements), dtype=np.float32)
        n = out.size
        rc = _lib.ds4_dequantize(
            int(ggml_type),
            _ffi.from_buffer("uint8_t[]", src),
            n,
            _ffi.from_buffer("float[]", out),
        )
        if rc != 0:
            raise Ds4Error(f"native dequantize of {ggml_type.name} failed (code {rc})")
        return out
