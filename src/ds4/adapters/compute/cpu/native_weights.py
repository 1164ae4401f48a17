"""Weights for the native backend: every product runs on the mmapped GGUF blocks.

A WeightStore whose matmul hands the raw block view (one expert, a range of rows) to
the native kernels; nothing is dequantized or copied. Small vectors (norms, HC scale and
base, sinks, biases, ape) and the embedding rows of the tokens in hand are still
decoded by the reference store, as they are lookups, not products.

Quantized weights always go through the integer dot products of formats.md §3 (the
kernels quantize the activation as the weight type requires), whatever the numerics;
F32 weights accumulate in f64, F16/BF16 in f32.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute import cpu_kernels
from ds4.adapters.compute.reference.weights import WeightStore
from ds4.domain.engine_math.numerics import Numerics
from ds4.domain.errors import Ds4Error
from ds4.ports.dequantizer import Dequantizer
from ds4.ports.model_file import ModelFile

F32 = npt.NDArray[np.float32]


class NativeWeightStore(WeightStore):
    def __init__(
        self,
        model: ModelFile,
        dequantizer: Dequantizer,
        numerics: Numerics,
        *,
        threads: int,
        impl: str = "auto",
    ) -> None:
        super().__init__(model, dequantizer, numerics)
        self._model_file = model
        self.threads = threads  # the pool is resized when another store used another count
        self.impl = impl

    def matmul(
        self, name: str, x: F32, *, rows: slice | None = None, expert: int | None = None
    ) -> F32:
        """y[t] = W x[t] for each row t of x (n, in) -> (n, out), natively."""
        info = self._model_file.tensors[name]
        raw = self._model_file.raw(name)
        if expert is not None:
            raw = raw[expert]
        if rows is not None:
            raw = raw[rows]
        if info.ggml_type not in cpu_kernels.MATMUL_TYPES:
            raise Ds4Error(f"{name}: the CPU backend has no kernel for {info.ggml_type.name}")
        return cpu_kernels.matmul(raw, info.ggml_type, x, threads=self.threads, impl=self.impl)
