"""Weights read from the memory-mapped model file on every use.

Matrices are dequantized (or decoded to integer codes) per call and dropped afterwards;
only small per-layer vectors (norms, HC scale/base, sinks, biases, ape) are kept.
With activation quantization on, quantized weights go through the integer dot products
of docs/reference/formats.md §5 instead of a float matmul.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from ds4.adapters.gguf.model_files import TensorValues
from ds4.domain.engine_math.lowprec import Numerics
from ds4.domain.engine_math.quant_dots import (
    QuantizedActivation,
    dot_iq2_xxs,
    dot_q2_k,
    dot_q4_k,
    dot_q8_0,
    quantize_q8_0,
    quantize_q8_k,
)
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.quant_formats import DEQUANTIZABLE
from ds4.ports.model_file import Dequantizer, ModelFile

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

_KQUANT_DOTS: dict[GGMLType, Callable[[U8, QuantizedActivation], F32]] = {
    GGMLType.Q2_K: dot_q2_k,
    GGMLType.Q4_K: dot_q4_k,
    GGMLType.IQ2_XXS: dot_iq2_xxs,
}


class WeightStore(TensorValues):
    """The lookups of TensorValues plus the reference engine's weight products."""

    def __init__(self, model: ModelFile, dequantizer: Dequantizer, numerics: Numerics) -> None:
        super().__init__(model, dequantizer)
        self._numerics = numerics

    def matmul(
        self, name: str, x: F32, *, rows: slice | None = None, expert: int | None = None
    ) -> F32:
        """y[t] = W x[t] for each row t of x (n, in) -> (n, out).

        rows picks a range of output rows; expert picks one matrix of a 3-D expert tensor.
        Each token is its own matvec, so prefill, chunks and decode give identical bits.
        """
        info = self._model.tensors[name]
        raw = self._model.raw(name)
        if expert is not None:
            raw = raw[expert]
        if rows is not None:
            raw = raw[rows]
        x = np.asarray(x, dtype=np.float32)
        kind = info.ggml_type
        if self._numerics.activation_quant and kind is GGMLType.Q8_0:
            return np.stack([dot_q8_0(raw, quantize_q8_0(xt)) for xt in x]).reshape(x.shape[0], -1)
        if self._numerics.activation_quant and kind in _KQUANT_DOTS:
            dot = _KQUANT_DOTS[kind]
            return np.stack([dot(raw, quantize_q8_k(xt)) for xt in x]).reshape(x.shape[0], -1)
        if kind not in DEQUANTIZABLE:
            raise Ds4Error(
                f"{name}: weight type {kind.name} is not supported by the reference engine"
            )
        w = self._deq.dequantize(raw, kind)
        if self._numerics.activation_quant and kind is GGMLType.F32:
            # F32 2-D weights accumulate in f64 (docs/reference/model.md §4.1)
            w64 = w.astype(np.float64)
            out64 = [w64 @ xt.astype(np.float64) for xt in x]
            return np.stack(out64).astype(np.float32).reshape(x.shape[0], -1)
        if self._numerics.activation_quant:  # F16/BF16: f32 products summed in index order
            return _sequential_f32(w, x)
        return np.stack([w @ xt for xt in x]).astype(np.float32).reshape(x.shape[0], -1)


def _sequential_f32(w: F32, x: F32) -> F32:
    """y[t, r] = (((0 + w[r,0]x[t,0]) + w[r,1]x[t,1]) + ...) with every product and sum
    rounded to f32: docs/reference/model.md §4.1's f32 accumulation in a fixed order (the native
    scalar kernel's), instead of BLAS's blocking."""
    acc = np.zeros((x.shape[0], w.shape[0]), dtype=np.float32)
    for i in range(w.shape[1]):
        acc += np.multiply.outer(x[:, i], w[:, i])
    return acc
