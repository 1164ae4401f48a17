"""The composition root: the one place that decides which adapter serves each port."""

from __future__ import annotations

from typing import Literal

from ds4.ports.dequantizer import Dequantizer
from ds4.ports.model_file import ModelFile

DequantBackend = Literal["native", "numpy"]


def open_model_file(path: str, *, prefetch: bool = False) -> ModelFile:
    from ds4.adapters.gguf.reader import GGUFFile

    return GGUFFile(path, prefetch=prefetch)


def dequantizer(backend: DequantBackend = "native") -> Dequantizer:
    if backend == "numpy":
        from ds4.adapters.quant.numpy_dequant import NumpyDequantizer

        return NumpyDequantizer()
    from ds4.adapters.quant.native_dequant import NativeDequantizer

    return NativeDequantizer()
