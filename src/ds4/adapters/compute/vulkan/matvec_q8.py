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

from ds4.adapters.compute.vulkan.matvec import VulkanWeights, kernel_tables
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS
from ds4.domain.engine_math.actquant import quantize_q8_0, quantize_q8_k
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
    shader = SHADERS_Q8.get(w.ggml_type)
    if shader is None:
        raise Ds4Error(f"no quantized-activation Vulkan kernel for {w.ggml_type.name} weights")
    xs = np.ascontiguousarray(x, dtype=np.float32)
    if xs.ndim != 2 or xs.shape[1] != w.cols or not 1 <= xs.shape[0] <= MAX_GROUPS:
        raise Ds4Error(f"matmul: activations {xs.shape} do not fit weights of {w.cols} columns")
    act = quantize_q8_0(xs) if w.ggml_type is GGMLType.Q8_0 else quantize_q8_k(xs)
    codes = np.ascontiguousarray(act.codes.reshape(xs.shape[0], -1), dtype=np.int8)
    scales = np.ascontiguousarray(act.scales, dtype=np.float32)
    bsums = np.zeros(1, np.int32) if act.bsums is None else act.bsums.astype(np.int32)
    rt, n_tok = w.rt, xs.shape[0]
    y_bytes = n_tok * w.rows * 4
    bufs = [rt.scratch("q8.codes", codes.nbytes), rt.scratch("q8.scales", scales.nbytes),
            rt.scratch("q8.y", y_bytes), rt.scratch("q8.bsums", bsums.nbytes)]  # fmt: skip
    for buf, data in zip(bufs, (codes, scales, None, bsums), strict=True):
        if data is not None:
            buf.write(data)
    tables = kernel_tables(rt, w)
    push = struct.pack("<5I", w.rows, w.cols, n_tok, w.row_bytes, w.offset)
    gx = min(w.rows, MAX_GROUPS)
    groups = (gx, -(-w.rows // gx), n_tok)
    rt.run(lambda rec: rec.dispatch(shader, [w.buffer, *bufs, *tables], push, groups))
    out: F32 = bufs[2].read(np.float32, n_tok * w.rows).reshape(n_tok, w.rows)
    return out
