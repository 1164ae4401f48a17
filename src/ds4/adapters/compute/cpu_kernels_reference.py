"""numpy statement of exactly what the native CPU kernels compute (the test oracle).

The quantized dots and activation quantizers are the engine's own
(ds4.domain.engine_math.quant_dots, docs/reference/formats.md §5.2–5.7); this module adds
the float-weight dots in the kernels' accumulation order (F16/BF16: f32 products summed
in index order; F32: exact products summed in f64 in index order, docs/reference/model.md §4.1) and
the routed-MoE composition of docs/reference/formats.md §5.8.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from ds4.domain.engine_math.layers import clamped_swiglu
from ds4.domain.engine_math.quant_dots import (
    QuantizedActivation,
    dot_iq2_xs,
    dot_iq2_xxs,
    dot_iq3_s,
    dot_iq3_xxs,
    dot_iq4_nl,
    dot_iq4_xs,
    dot_mxfp4,
    dot_q2_k,
    dot_q3_k,
    dot_q4_k,
    dot_q5_k,
    dot_q6_k,
    dot_q8_0,
    quantize_q8_0,
    quantize_q8_k,
)
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.quant_formats import FORMATS_BY_TYPE

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

_Q8_0_DOTS: dict[GGMLType, Callable[[U8, QuantizedActivation], F32]] = {
    GGMLType.Q8_0: dot_q8_0,
    GGMLType.MXFP4: dot_mxfp4,
    GGMLType.IQ4_NL: dot_iq4_nl,
}
_Q8K_DOTS: dict[GGMLType, Callable[[U8, QuantizedActivation], F32]] = {
    GGMLType.Q2_K: dot_q2_k,
    GGMLType.Q4_K: dot_q4_k,
    GGMLType.IQ2_XXS: dot_iq2_xxs,
    GGMLType.Q3_K: dot_q3_k,
    GGMLType.Q5_K: dot_q5_k,
    GGMLType.Q6_K: dot_q6_k,
    GGMLType.IQ4_XS: dot_iq4_xs,
    GGMLType.IQ2_XS: dot_iq2_xs,
    GGMLType.IQ3_XXS: dot_iq3_xxs,
    GGMLType.IQ3_S: dot_iq3_s,
}


def float_weights(raw: U8, ggml_type: GGMLType) -> F32:
    """F32 / F16 / BF16 raw rows (rows, row_bytes) as f32 values (exact)."""
    data = np.ascontiguousarray(raw)
    if ggml_type is GGMLType.F32:
        out: F32 = data.view("<f4").astype(np.float32)
    elif ggml_type is GGMLType.F16:
        out = data.view("<f2").astype(np.float32)
    elif ggml_type is GGMLType.BF16:
        out = (data.view("<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        raise ValueError(f"{ggml_type.name} is not a float type")
    return out


def dot_float_index_order(raw: U8, ggml_type: GGMLType, x: F32) -> F32:
    """Each row's dot with x, accumulated one index at a time from 0."""
    w = float_weights(raw, ggml_type)
    if ggml_type is GGMLType.F32:
        acc64 = np.zeros(w.shape[0], dtype=np.float64)
        w64, x64 = w.astype(np.float64), x.astype(np.float64)
        for i in range(w.shape[1]):
            acc64 += w64[:, i] * x64[i]
        out: F32 = acc64.astype(np.float32)
        return out
    acc = np.zeros(w.shape[0], dtype=np.float32)
    for i in range(w.shape[1]):
        acc = (acc + w[:, i] * x[i]).astype(np.float32)
    return acc


def matvec_reference(raw: U8, ggml_type: GGMLType, x: F32) -> F32:
    """What ds4_cpu_matmul's scalar kernels return for one activation vector."""
    x = np.asarray(x, dtype=np.float32)
    activation = FORMATS_BY_TYPE[ggml_type].activation
    if activation == "f32":
        return dot_float_index_order(raw, ggml_type, x)
    if activation == "q8_0":
        return _Q8_0_DOTS[ggml_type](raw, quantize_q8_0(x))
    return _Q8K_DOTS[ggml_type](raw, quantize_q8_k(x))


def moe_reference(
    x: F32,
    gate: tuple[U8, GGMLType],
    up: tuple[U8, GGMLType],
    down: tuple[U8, GGMLType],
    expert_ids: npt.ArrayLike,
    route_weights: F32,
    clamp: float,
) -> F32:
    """docs/reference/formats.md §5.8 for one token; expert tensors as (raw 3-D blocks, type)."""
    xq = quantize_q8_k(np.asarray(x, dtype=np.float32))
    ids = [int(e) for e in np.asarray(expert_ids).ravel()]
    out = np.zeros(down[0].shape[1], dtype=np.float32)
    for k, e in enumerate(ids):
        g = _Q8K_DOTS[gate[1]](gate[0][e], xq)
        u = _Q8K_DOTS[up[1]](up[0][e], xq)
        mid = (clamped_swiglu(g, u, clamp) * route_weights[k]).astype(np.float32)
        out = (out + _Q8K_DOTS[down[1]](down[0][e], quantize_q8_k(mid))).astype(np.float32)
    return out
