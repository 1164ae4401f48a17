"""`--backend vulkan`: the device-resident forward (docs/vulkan.md, ADR 0066).

The sequence's KV state and each step's activations live in device buffers; a step is
recorded into one submission plus one per host fallback still taken (the list is
forward.HOST_FALLBACKS, reported by docs/vulkan.md#status). Weight products run over the
raw GGUF blocks resident on the device. Steering and activation capture run the
reference forward with the same device weight products instead.
"""

from __future__ import annotations

from ds4.adapters.compute.reference.runner import ReferenceRunner, reference_numerics
from ds4.adapters.compute.vulkan.forward import VulkanForward
from ds4.adapters.compute.vulkan.runtime import runtime
from ds4.adapters.compute.vulkan.sequence_state import VulkanState
from ds4.adapters.compute.vulkan.vk_api import VulkanUnavailableError
from ds4.adapters.compute.vulkan.weight_store import VulkanWeightStore
from ds4.adapters.quant.numpy_dequant import NumpyDequantizer
from ds4.domain.engine_math.lowprec import Numerics
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import ModelRunner, SequenceState
from ds4.ports.model_file import Dequantizer, ModelFile


class VulkanRunner(ReferenceRunner):
    """The reference runner's session machinery over device-resident states."""

    def __init__(self, model: ModelFile, hparams: DeepSeekV4HParams, numerics: Numerics,
                 dequantizer: Dequantizer, store: VulkanWeightStore) -> None:  # fmt: skip
        super().__init__(model, hparams, numerics, dequantizer, weights=store)
        self.device_forward = VulkanForward(hparams, store, numerics)

    def new_state(self, ctx: int) -> SequenceState:
        return VulkanState(self.device_forward, self.forward, ctx)


def vulkan_runner(
    model: ModelFile,
    hparams: DeepSeekV4HParams,
    *,
    numerics: str = "ds4",
    dequantizer: Dequantizer | None = None,
    device_forward: bool = True,
) -> ModelRunner:
    """The vulkan backend over an opened model; Ds4Error saying why where it cannot run.
    device_forward False: the earlier path (reference forward on the host, each weight
    product one submission), kept for side-by-side measurement."""
    chosen = reference_numerics(numerics, hparams)
    try:
        rt = runtime()
    except VulkanUnavailableError as exc:
        raise Ds4Error(f"--backend vulkan: {exc}") from None
    deq = dequantizer or NumpyDequantizer()
    store = VulkanWeightStore(model, deq, chosen, rt)
    if not device_forward:
        return ReferenceRunner(model, hparams, chosen, deq, weights=store)
    return VulkanRunner(model, hparams, chosen, deq, store)
