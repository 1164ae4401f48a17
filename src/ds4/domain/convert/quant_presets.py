"""Which GGML type each tensor gets under a quant preset (docs/reference/formats.md §3.6, §3.5).

Non-expert tensors follow the published ds4 mixture (attention, shared experts and
the LM head Q8_0; HC, router, compressor, indexer and embedding F16; norms and other
vectors F32); the presets differ in the routed experts, except f32/f16, which keep
everything at that precision (oracle and debugging models).
"""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType
from ds4.domain.gguf.quant_formats import Role
from ds4.domain.model.catalog import TensorSpec
from ds4.domain.model.hparams import DeepSeekV4HParams

QUANT_PRESETS = ("f32", "f16", "q8", "q4", "q2", "q2-q4")
DEFAULT_Q4_LAST_LAYERS_DIVISOR = 4  # q2-q4: the last quarter of the layers gets Q4_K experts


@dataclass(frozen=True)
class QuantPlan:
    preset: str
    q4_last_layers: int  # q2-q4 only: this many final layers get Q4_K experts

    def tensor_type(self, spec: TensorSpec, hp: DeepSeekV4HParams) -> GGMLType:
        role, preset = spec.role, self.preset
        if role is Role.INDEX:
            return GGMLType.I32
        if role is Role.VECTOR or preset == "f32":
            return GGMLType.F32
        if role is Role.FLOAT or preset == "f16":
            return GGMLType.F16
        if role is Role.PROJECTION:
            return GGMLType.Q8_0
        return self._expert_type(spec, hp)

    def _expert_type(self, spec: TensorSpec, hp: DeepSeekV4HParams) -> GGMLType:
        preset = self.preset
        layer = spec.layer if spec.layer is not None else hp.n_layer - 1
        if preset == "q8":
            return GGMLType.Q8_0
        if preset == "q4" or (preset == "q2-q4" and layer >= hp.n_layer - self.q4_last_layers):
            return GGMLType.Q4_K
        return GGMLType.Q2_K if "down_exps" in spec.name else GGMLType.IQ2_XXS


def quant_plan(preset: str, hp: DeepSeekV4HParams, q4_last_layers: int | None = None) -> QuantPlan:
    if preset not in QUANT_PRESETS:
        raise Ds4Error(f"unknown quant preset {preset!r} (choose from {', '.join(QUANT_PRESETS)})")
    if q4_last_layers is None:
        q4_last_layers = max(1, hp.n_layer // DEFAULT_Q4_LAST_LAYERS_DIVISOR)
    if not 0 <= q4_last_layers <= hp.n_layer:
        raise Ds4Error(f"--q4-last-layers {q4_last_layers} is outside 0..{hp.n_layer}")
    return QuantPlan(preset, q4_last_layers)


def check_plan_fits(plan: QuantPlan, specs: list[TensorSpec], hp: DeepSeekV4HParams) -> None:
    """Every row must be whole blocks of its target type; say which tensor breaks that."""
    for spec in specs:
        ggml_type = plan.tensor_type(spec, hp)
        block = BLOCK_GEOMETRY[ggml_type].elements
        if spec.dims[0] % block:
            raise Ds4Error(
                f"quant preset {plan.preset}: {spec.name} rows have {spec.dims[0]} values, "
                f"not a multiple of the {ggml_type.name} block ({block}); use a shape with "
                f"wider rows or a higher-precision preset"
            )
