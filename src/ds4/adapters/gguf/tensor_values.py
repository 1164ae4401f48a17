"""Values of a model file's lookup tensors, decoded from the mmapped blocks on demand.

Every backend needs these as f32 whatever the file stores: small per-layer vectors
(norms, HC scale/base, sinks, biases, ape; decoded once and cached), embedding rows of
the tokens in hand, and the hash-routing table. Weight products never come through
here: each backend runs them on the raw blocks its own way.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.domain.gguf.ggml_types import GGMLType
from ds4.ports.model_file import Dequantizer, ModelFile

F32 = npt.NDArray[np.float32]

_SMALL_SUFFIXES = ("_norm.weight", "_scale.weight", "_base.weight", "sinks.weight", ".bias",
                   "_ape.weight", "norm.weight")  # fmt: skip


class TensorValues:
    def __init__(self, model: ModelFile, dequantizer: Dequantizer) -> None:
        self._model = model
        self._deq = dequantizer
        self._small: dict[str, F32] = {}

    def has(self, name: str) -> bool:
        return name in self._model.tensors

    def ggml_type(self, name: str) -> GGMLType:
        return self._model.tensors[name].ggml_type

    def small(self, name: str) -> F32:
        """A small tensor (norm, scale, base, sinks, bias, ape) as f32, cached."""
        cached = self._small.get(name)
        if cached is None:
            if not name.endswith(_SMALL_SUFFIXES):
                raise ValueError(f"{name} is not a small tensor")
            info = self._model.tensors[name]
            cached = self._deq.dequantize(self._model.raw(name), info.ggml_type)
            cached = cached.reshape(info.numpy_shape).astype(np.float32)
            self._small[name] = cached
        return cached

    def rows(self, name: str, ids: npt.NDArray[np.int64]) -> F32:
        """Selected rows of a 2-D tensor as f32 (the embedding lookup)."""
        info = self._model.tensors[name]
        return self._deq.dequantize(self._model.raw(name)[ids], info.ggml_type)

    def int_rows(self, name: str, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Selected rows of an I32 table (the hash-routing tid2eid table)."""
        raw = np.ascontiguousarray(self._model.raw(name)[ids])
        return raw.view("<i4").astype(np.int64)
