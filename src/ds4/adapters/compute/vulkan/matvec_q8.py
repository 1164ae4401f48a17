"""The ds4 numerics' weight products on the GPU: integer dots against quantized activations.

The activation is quantized on the host by the engine's own quantizers (Q8_0 for Q8_0
weights, Q8_K for the K-quants and IQ2_XXS; docs/reference/formats.md §5), so the codes
are the cpu backend's bit for bit; the shaders form each block's integer dot and f32
scale products as the reference does, and only the f32 order of the block sum differs.
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.matvec import VulkanWeights, kernel_tables
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS, Recorder
from ds4.domain.engine_math.quant_dots import quantize_q8_0, quantize_q8_k
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType

F32 = npt.NDArray[np.float32]

SHADERS_Q8 = {
    GGMLType.Q8_0: "matvec_q8_0_q8",
    GGMLType.Q2_K: "matvec_q2_k_q8",
    GGMLType.Q4_K: "matvec_q4_k_q8",
    GGMLType.IQ2_XXS: "matvec_iq2_xxs_q8",
}


def matmul_q8(w: VulkanWeights, x: npt.ArrayLike) -> F32:
    """y[t] = W . quantize(x[t]) for x (n_tok, cols) -> (n_tok, rows), ds4 numerics."""
    xs = np.ascontiguousarray(x, dtype=np.float32)
    acts = stage_activations(w, xs)
    tables = kernel_tables(w.rt, w)
    w.rt.run(lambda rec: record_matmul_q8(rec, w, acts, xs.shape[0], tables))
    out: F32 = acts[2].read(np.float32, xs.shape[0] * w.rows).reshape(xs.shape[0], w.rows)
    return out


def stage_activations(w: VulkanWeights, xs: F32) -> list[Buffer]:
    """Quantize xs (n_tok, cols) as w's type needs and write [codes, scales, y, bsums]
    into the runtime's scratch buffers (y sized for the result)."""
    if w.ggml_type not in SHADERS_Q8:
        raise Ds4Error(f"no quantized-activation Vulkan kernel for {w.ggml_type.name} weights")
    if xs.ndim != 2 or xs.shape[1] != w.cols or not 1 <= xs.shape[0] <= MAX_GROUPS:
        raise Ds4Error(f"matmul: activations {xs.shape} do not fit weights of {w.cols} columns")
    act = quantize_q8_0(xs) if w.ggml_type is GGMLType.Q8_0 else quantize_q8_k(xs)
    codes = np.ascontiguousarray(act.codes.reshape(xs.shape[0], -1), dtype=np.int8)
    scales = np.ascontiguousarray(act.scales, dtype=np.float32)
    bsums = np.zeros(1, np.int32) if act.bsums is None else act.bsums.astype(np.int32)
    rt = w.rt
    y_bytes = xs.shape[0] * w.rows * 4
    bufs = [rt.scratch("q8.codes", codes.nbytes), rt.scratch("q8.scales", scales.nbytes),
            rt.scratch("q8.y", y_bytes), rt.scratch("q8.bsums", bsums.nbytes)]  # fmt: skip
    bufs[0].write(codes)
    bufs[1].write(scales)
    bufs[3].write(bsums)
    return bufs


def record_matmul_q8(
    rec: Recorder, w: VulkanWeights, acts: list[Buffer], n_tok: int, tables: list[Buffer]
) -> None:
    """Record one ds4-numerics matmul; acts from stage_activations, tables from
    kernel_tables (both prepared before recording)."""
    push = struct.pack("<5I", w.rows, w.cols, n_tok, w.row_bytes, w.offset)
    gx = min(w.rows, MAX_GROUPS)
    groups = (gx, -(-w.rows // gx), n_tok)
    rec.dispatch(SHADERS_Q8[w.ggml_type], [w.buffer, *acts, *tables], push, groups)
