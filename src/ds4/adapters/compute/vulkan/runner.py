"""`--backend vulkan`: the reference forward with every weight product on the GPU.

What runs where (docs/vulkan.md#status): the weight matmuls (projections, experts,
shared expert, head) run as Vulkan shaders over the raw blocks resident on the device
(ds4 numerics: integer dots on activations quantized on the host; fp32: f32 dots);
norms, HC, RoPE, compressors, the indexer, attention, routing and sampling run in the
reference engine's numpy on the host, with activations copied each way per matmul.
The whole forward on the GPU is not done yet; this says so instead of claiming it.
"""

from __future__ import annotations

from ds4.adapters.compute.reference.runner import ReferenceRunner, reference_numerics
from ds4.adapters.compute.vulkan.runtime import runtime
from ds4.adapters.compute.vulkan.vk_api import VulkanUnavailableError
from ds4.adapters.compute.vulkan.weight_store import VulkanWeightStore
from ds4.adapters.quant.numpy_dequant import NumpyDequantizer
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import ModelRunner
from ds4.ports.dequantizer import Dequantizer
from ds4.ports.model_file import ModelFile


def vulkan_runner(
    model: ModelFile,
    hparams: DeepSeekV4HParams,
    *,
    numerics: str = "ds4",
    dequantizer: Dequantizer | None = None,
) -> ModelRunner:
    """The vulkan backend over an opened model; Ds4Error saying why where it cannot run."""
    chosen = reference_numerics(numerics, hparams)
    try:
        rt = runtime()
    except VulkanUnavailableError as exc:
        raise Ds4Error(f"--backend vulkan: {exc}") from None
    deq = dequantizer or NumpyDequantizer()
    store = VulkanWeightStore(model, deq, chosen, rt)
    return ReferenceRunner(model, hparams, chosen, deq, weights=store)
