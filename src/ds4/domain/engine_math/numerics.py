"""Which low-precision effects of the reference engine a forward pass simulates."""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.errors import Ds4Error


@dataclass(frozen=True)
class Numerics:
    """Switches for model.md §7.4; `fp32` turns all of them off (docs/oracle §3).

    kv_rounding: FP8 E4M3 on KV rows, f16 rounding of every cached row.
    indexer_qat: Hadamard + FP4 on indexer rows and queries.
    activation_quant: Q8_0 / Q8_K activation codes and integer dots for quantized weights.
    iterated_rope: ds4's iterated f32 angle product instead of pos * inv_freq.
    """

    name: str
    kv_rounding: bool
    indexer_qat: bool
    activation_quant: bool
    iterated_rope: bool


DS4 = Numerics("ds4", kv_rounding=True, indexer_qat=True, activation_quant=True, iterated_rope=True)
# ds4's rounding points with model.md's strict operation order (sequential f32 sums,
# libm f32 transcendentals): only the native CPU backend's scalar path provides it.
EXACT = Numerics(
    "exact", kv_rounding=True, indexer_qat=True, activation_quant=True, iterated_rope=True
)
FP32 = Numerics(
    "fp32", kv_rounding=False, indexer_qat=False, activation_quant=False, iterated_rope=False
)


def numerics_named(name: str) -> Numerics:
    for choice in (DS4, EXACT, FP32):
        if choice.name == name:
            return choice
    raise Ds4Error(f"unknown numerics {name!r} (expected ds4, exact or fp32)")
