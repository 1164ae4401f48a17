"""The fp32 agreement contract for the Vulkan kernels and its float64 references.

Bound: for each output y = sum_k w_k x_k, |y_vulkan - y_ref| <= REL * sum_k |w_k x_k|,
with y_ref computed in float64 from the same f32 inputs and REL = 1e-4. (Relative to
the sum of magnitudes rather than |y|, so cancellation cannot make a correct f32 sum
fail; a wrong decode of even one block misses it by orders of magnitude.)
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.adapters.quant.numpy_codec import NumpyDequantizer
from ds4.domain.gguf.ggml_types import GGMLType

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
U8 = npt.NDArray[np.uint8]
REL = 1e-4


def dequantized(raw: U8, ggml_type: GGMLType, rows: int, cols: int) -> F64:
    """The repository's reference decoding of raw block rows, as float64 (rows, cols)."""
    if ggml_type is GGMLType.F32:
        w = raw.view(np.float32)
    elif ggml_type is GGMLType.F16:
        w = raw.view(np.float16).astype(np.float32)
    else:
        w = NumpyDequantizer().dequantize(raw, ggml_type)
    return np.asarray(w, dtype=np.float64).reshape(rows, cols)


def assert_dot_agrees(got: F32, w: F64, x: F32) -> None:
    """got (n_tok, rows) == x @ w.T within the contract above."""
    x64 = x.astype(np.float64)
    ref = x64 @ w.T
    scale = np.abs(x64) @ np.abs(w).T
    err = np.abs(got.astype(np.float64) - ref)
    assert got.shape == ref.shape
    assert np.all(np.isfinite(got))
    worst = float(np.max(err - REL * scale))
    assert worst <= 0.0, f"max excess over the 1e-4 bound: {worst}"
