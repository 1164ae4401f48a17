"""Low precision in the reference forward pass (docs/reference/model.md §2, §2.5): FP8 E4M3
and FP4 E2M1 round trips, the 128-point Hadamard, and which of these effects a forward
pass simulates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams

# --- lowprec ---
# FP8 E4M3 / FP4 E2M1 round trips and the 128-point Hadamard (docs/reference/model.md §2, §2.5).

F32 = npt.NDArray[np.float32]

FP8_MAX = 448.0
FP4_MAX = 6.0
FP4_AMAX_FLOOR = 7.052966104933725e-38
HADAMARD_SCALE = 0.08838834764831845  # 1/sqrt(128)


def _pow2_scale(amax: F32, top: float) -> F32:
    """2^ceil(log2(amax/top)) with log2 evaluated in f32, as log2f does."""
    ratio = (amax / np.float32(top)).astype(np.float32)
    exp = np.ceil(np.log2(ratio).astype(np.float32))
    out: F32 = np.exp2(exp).astype(np.float32)
    return out


def _round_minifloat(u: F32, mant_bits: int, min_exp: int, top: float) -> F32:
    """Nearest value of a small float format, ties to even mantissa, saturating at top.

    A value in [2^E, 2^(E+1)) is a multiple of 2^(E - mant_bits); below the smallest normal
    exponent the step stays 2^(min_exp - mant_bits) (subnormals). The multiple's parity is
    the mantissa's parity, so rint (ties to even) gives ties-to-even-mantissa.
    """
    mag = np.abs(np.asarray(u, dtype=np.float32))
    _, exp = np.frexp(mag)  # mag = m * 2^exp with m in [0.5, 1)
    e = np.maximum(exp.astype(np.int32) - 1, min_exp)
    step = np.ldexp(np.float32(1), e - mant_bits).astype(np.float32)
    rounded = np.minimum(np.rint(mag / step) * step, np.float32(top)).astype(np.float32)
    out: F32 = np.copysign(rounded, u).astype(np.float32)
    return out


def e4m3_round(u: F32) -> F32:
    """Nearest E4M3FN value, ties to even mantissa, saturating at +-448."""
    return _round_minifloat(u, 3, -6, FP8_MAX)


def e2m1_round(u: F32) -> F32:
    """Nearest of {0, .5, 1, 1.5, 2, 3, 4, 6} (signed), ties to the even index."""
    return _round_minifloat(u, 1, 0, FP4_MAX)


def _blockwise(v: F32, block: int, top: float, floor: float, rounder: str) -> F32:
    blocks = v.reshape(*v.shape[:-1], -1, block)
    amax = np.maximum(np.max(np.abs(blocks), axis=-1, keepdims=True), np.float32(floor))
    scale = _pow2_scale(amax.astype(np.float32), top)
    u = (blocks / scale).astype(np.float32)
    rounded = e4m3_round(u) if rounder == "e4m3" else e2m1_round(u)
    out: F32 = (rounded * scale).astype(np.float32).reshape(v.shape)
    return out


def fp8_kv_sim(row: F32, n_nope: int) -> F32:
    """E4M3 round trip of dims [0, n_nope) in blocks of 64; the RoPE tail is untouched."""
    out = np.array(row, dtype=np.float32, copy=True)
    out[..., :n_nope] = _blockwise(out[..., :n_nope], 64, FP8_MAX, 1e-4, "e4m3")
    return out


def fp4_sim(v: F32) -> F32:
    """E2M1 round trip in blocks of 32."""
    return _blockwise(np.asarray(v, dtype=np.float32), 32, FP4_MAX, FP4_AMAX_FLOOR, "e2m1")


def hadamard128(v: F32) -> F32:
    """Walsh-Hadamard butterflies over each 128-wide row, then times 1/sqrt(128)."""
    out = np.array(v, dtype=np.float32, copy=True)
    n = out.shape[-1]
    h = 1
    while h < n:
        view = out.reshape(*out.shape[:-1], n // (2 * h), 2, h)
        a = view[..., 0, :].copy()
        b = view[..., 1, :].copy()
        view[..., 0, :] = a + b
        view[..., 1, :] = a - b
        h *= 2
    scaled: F32 = (out * np.float32(HADAMARD_SCALE)).astype(np.float32)
    return scaled


def indexer_qat(v: F32) -> F32:
    return fp4_sim(hadamard128(v))


# --- numerics ---
# Which low-precision effects of the reference engine a forward pass simulates.


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
