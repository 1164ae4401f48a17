"""Weights resident on the GPU (`--backend vulkan`, docs/vulkan.md).

Each weight tensor goes to the device once, as its raw GGUF blocks (a 3-D expert tensor
as one buffer, experts addressed by offset): the device forward records its products
over them (`device`), and `matmul` serves the reference forward's host path (steering,
activation capture) with one submission per product. fp32
numerics: f32 dots on the decoded weights. ds4 numerics: quantized weights take the
integer dots against activations quantized on the host by the engine's quantizers
(matvec_q8.py); F32/F16 weights take the f32 dots (the reference sums F32 in f64 and
F16 in index order: within the fast path's noise). A weight type without a shader is an
error, never a quiet CPU product.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.weights import WeightStore
from ds4.adapters.compute.vulkan.matvec import SHADERS, VulkanWeights, matmul, upload_weights
from ds4.adapters.compute.vulkan.matvec_q8 import SHADERS_Q8, matmul_q8
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.domain.engine_math.lowprec import Numerics
from ds4.domain.errors import Ds4Error
from ds4.ports.model_file import Dequantizer, ModelFile

F32 = npt.NDArray[np.float32]


class VulkanWeightStore(WeightStore):
    def __init__(
        self, model: ModelFile, dequantizer: Dequantizer, numerics: Numerics, rt: VulkanRuntime
    ) -> None:
        if numerics.name == "exact":
            raise Ds4Error("--numerics exact runs on the native CPU backend (--backend cpu)")
        super().__init__(model, dequantizer, numerics)
        self._rt = rt
        self._resident: dict[str, VulkanWeights] = {}

    @property
    def resident_bytes(self) -> int:
        return sum(w.buffer.size for w in self._resident.values())

    @property
    def rt(self) -> VulkanRuntime:
        return self._rt

    @property
    def activation_quant(self) -> bool:
        return self._numerics.activation_quant

    def raw_tensor(self, name: str) -> npt.NDArray[np.uint8]:
        """The tensor's raw GGUF bytes (e.g. the hash-routing table, uploaded as is)."""
        raw: npt.NDArray[np.uint8] = self._model.raw(name)
        return raw

    def matmul(
        self, name: str, x: F32, *, rows: slice | None = None, expert: int | None = None
    ) -> F32:
        """y[t] = W x[t] on the device; the same contract as WeightStore.matmul."""
        w = self.device(name, rows=rows, expert=expert)
        xs = np.asarray(x, dtype=np.float32).reshape(-1, w.cols)
        if self._numerics.activation_quant and w.ggml_type in SHADERS_Q8:
            return matmul_q8(w, xs)
        return matmul(w, xs)

    def device(
        self, name: str, *, rows: slice | None = None, expert: int | None = None
    ) -> VulkanWeights:
        """The resident tensor `name` (uploaded on first use), or one expert's matrix or a
        plain range of its rows, as a view of the same buffer."""
        w = self._tensor(name)
        if expert is not None:
            per_expert = self._model.tensors[name].dims[1]
            if not 0 <= expert < w.rows // per_expert:
                raise Ds4Error(f"{name}: expert {expert} out of range")
            w = w.view(expert * per_expert, per_expert)
        if rows is not None:
            start, stop, step = rows.indices(w.rows)
            if step != 1 or stop <= start:
                raise Ds4Error(f"{name}: row range {rows} is not a plain non-empty slice")
            w = w.view(start, stop - start)
        return w

    def _tensor(self, name: str) -> VulkanWeights:
        have = self._resident.get(name)
        if have is None:
            info = self._model.tensors[name]
            if info.ggml_type not in SHADERS:
                raise Ds4Error(f"{name}: {info.ggml_type.name} weights have no Vulkan kernel yet")
            raw = self._model.raw(name)
            flat = raw.reshape(-1, raw.shape[-1])  # experts stacked row-wise, in order
            have = upload_weights(flat, info.ggml_type, info.dims[0], rt=self._rt)
            self._resident[name] = have
        return have
