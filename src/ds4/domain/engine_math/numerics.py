"""Which low-precision effects of the reference engine a forward pass simulates."""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams


@dataclass(frozen=True)
class Numerics:
    """Switches for docs/reference/model.md §4.3–4.4; `fp32` turns all of them off
    (docs/oracle/hf_deepseek_v4.md §3).

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
# ds4's rounding points with docs/reference/model.md §4.5's strict operation order (sequential f32
# sums, libm f32 transcendentals): only the native CPU backend's scalar path provides it.
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


def check_numerics_fit(numerics: Numerics, hp: DeepSeekV4HParams) -> None:
    """Ds4Error (one line) when the model's shapes cannot take the numerics' rounding points.

    The indexer QAT is a 128-point Hadamard per head, and FP8 KV
    rounding works in blocks of 64 non-RoPE dims: other shapes have no ds4 rounding to
    simulate, so both backends refuse them at open rather than round part of a row (or
    fail mid-run); `fp32` numerics simulate neither and run any shape.
    """
    has_indexer = any(hp.has_indexer(il) for il in range(hp.n_layer))
    if numerics.indexer_qat and has_indexer and hp.indexer_head_dim != 128:
        raise Ds4Error(
            f"indexer head dim {hp.indexer_head_dim}: --numerics {numerics.name} needs 128 "
            "(its indexer QAT is a 128-point Hadamard); use --numerics fp32"
        )
    if numerics.kv_rounding and hp.n_rope_free % 64:
        raise Ds4Error(
            f"head dim {hp.head_dim} with {hp.n_rot} RoPE dims: --numerics {numerics.name} needs "
            "the non-RoPE dims in whole blocks of 64 (FP8 KV rounding); use --numerics fp32"
        )
