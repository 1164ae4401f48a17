"""What a converted GGUF is planned to hold: the GGML type each tensor gets under a quant
preset (docs/reference/formats.md §3.6, §3.5), the planned tensors the model generators
hand the GGUF writer, and the provenance records written into every GGUF ds4 makes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType
from ds4.domain.gguf.quant_formats import Role
from ds4.domain.gguf.records import MetaValue, meta_str, meta_u32
from ds4.domain.model.catalog import TensorSpec
from ds4.domain.model.hparams import DeepSeekV4HParams

# --- quant presets ---
# Which GGML type each tensor gets under a quant preset (docs/reference/formats.md §3.6, §3.5).
#
# Non-expert tensors follow the published ds4 mixture (attention, shared experts and
# the LM head Q8_0; HC, router, compressor, indexer and embedding F16; norms and other
# vectors F32); the presets differ in the routed experts, except f32/f16/bf16, which keep
# everything at that precision (oracle and debugging models). One `QuantPreset` row per
# `--quant` name.


@dataclass(frozen=True)
class QuantPreset:
    """The routed experts' types under one `--quant` name."""

    gate_up: GGMLType  # ffn_gate_exps, ffn_up_exps
    down: GGMLType  # ffn_down_exps
    last_layers: GGMLType | None = None  # every expert of the final layers (--q4-last-layers)
    everything: GGMLType | None = None  # f32/f16/bf16: every tensor but I32 and F32 vectors


_G = GGMLType
PRESETS: dict[str, QuantPreset] = {
    "f32": QuantPreset(_G.F32, _G.F32, everything=_G.F32),
    "f16": QuantPreset(_G.F16, _G.F16, everything=_G.F16),
    "q8": QuantPreset(_G.Q8_0, _G.Q8_0),
    "q4": QuantPreset(_G.Q4_K, _G.Q4_K),
    "q2": QuantPreset(_G.IQ2_XXS, _G.Q2_K),
    "q2-q4": QuantPreset(_G.IQ2_XXS, _G.Q2_K, last_layers=_G.Q4_K),
    # The release's FP4 experts repacked as they are (docs/reference/formats.md §3.6).
    "mxfp4": QuantPreset(_G.MXFP4, _G.MXFP4),
    # llama.cpp's converter's float type, for comparing with its files.
    "bf16": QuantPreset(_G.BF16, _G.BF16, everything=_G.BF16),
}
QUANT_PRESETS = tuple(PRESETS)
DEFAULT_Q4_LAST_LAYERS_DIVISOR = 4  # q2-q4: the last quarter of the layers gets Q4_K experts


@dataclass(frozen=True)
class QuantPlan:
    preset: str
    q4_last_layers: int  # presets with last_layers only: this many final layers get it

    def tensor_type(self, spec: TensorSpec, hp: DeepSeekV4HParams) -> GGMLType:
        role, row = spec.role, PRESETS[self.preset]
        if role is Role.INDEX:
            return GGMLType.I32
        if row.everything is not None and role is not Role.VECTOR:
            return row.everything
        if role is Role.VECTOR:
            return GGMLType.F32
        if role is Role.FLOAT:
            return GGMLType.F16
        if role is Role.PROJECTION:
            return GGMLType.Q8_0
        return self._expert_type(spec, hp, row)

    def _expert_type(self, spec: TensorSpec, hp: DeepSeekV4HParams, row: QuantPreset) -> GGMLType:
        layer = spec.layer if spec.layer is not None else hp.n_layer - 1
        if row.last_layers is not None and layer >= hp.n_layer - self.q4_last_layers:
            return row.last_layers
        return row.down if "down_exps" in spec.name else row.gate_up


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


# --- planned ---
# Value types shared by the model generators and the GGUF model writer.

Values = npt.NDArray[np.float32] | npt.NDArray[np.int32]


@dataclass(frozen=True)
class PlannedTensor:
    name: str
    dims: tuple[int, ...]  # GGUF order
    ggml_type: GGMLType

    @property
    def numpy_shape(self) -> tuple[int, ...]:
        return tuple(reversed(self.dims))


@dataclass(frozen=True)
class Chunk:
    values: Values  # leading-axis rows of the tensor, in order
    importance: npt.NDArray[np.float32] | None = None  # per column, for the quantizer
    # The same rows already in the planned type's blocks (a lossless repack, such as
    # FP4 experts into MXFP4); written as they are instead of quantizing `values`.
    encoded: npt.NDArray[np.uint8] | None = None


# --- provenance ---
# Provenance records written into every GGUF ds4 makes (shown by `ds4 gguf inspect`).

_RESERVED = frozenset({"tool", "source", "quant_preset", "imatrix"})
_KEY = re.compile(r"[a-z][a-z0-9_]*")


def provenance_metadata(
    tool_version: str, source: str, quant_preset: str, **extra: str | int
) -> dict[str, MetaValue]:
    """`ds4.convert.*` keys. No timestamps: the same inputs give the same bytes."""
    out = {
        "ds4.convert.tool": meta_str(f"ds4 {tool_version}"),
        "ds4.convert.source": meta_str(source),
        "ds4.convert.quant_preset": meta_str(quant_preset),
    }
    for key, value in extra.items():
        out[f"ds4.convert.{key}"] = meta_str(value) if isinstance(value, str) else meta_u32(value)
    return out


def meta_flags(items: Iterable[str]) -> dict[str, str]:
    """`--meta KEY=VALUE` flags as extra provenance strings (KEY: lower-case identifier,
    not one the converter writes itself, given once)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or _KEY.fullmatch(key) is None:
            raise Ds4Error(f"--meta {item!r}: expected KEY=VALUE with KEY like train_seed")
        if key in _RESERVED or key in out:
            raise Ds4Error(f"--meta {key}: key already set")
        out[key] = value
    return out
