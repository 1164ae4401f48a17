"""ds4 numerics' activation quantization on the GPU (native/vulkan/quant_q8_*.comp).

The codes, scales and Q8_K block sums equal the engine's own quantizers
(domain/engine_math/quant_dots.py, which matvec_q8.stage_activations runs on the host)
bit for bit: the scale divisions are rounded exactly (div_rn.glsl), the codes round half
to even. Outside that guarantee: non-finite inputs, and blocks whose largest |x| is below
127 * 2^-126 (the device may flush the subnormal scale to zero). docs/vulkan.md#kernels.
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.matvec import VulkanWeights
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime, runtime
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS, Recorder
from ds4.domain.engine_math.quant_dots import QuantizedActivation
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType

F32 = npt.NDArray[np.float32]
WG = 64
Q8_0_BLOCK = 32
Q8_K_BLOCK = 256


def quantize(x: npt.ArrayLike, block: int, *, rt: VulkanRuntime | None = None
             ) -> QuantizedActivation:  # fmt: skip
    """Quantize x (n_tok, cols) on the device as Q8_0 (block 32) or Q8_K (block 256);
    codes (n_tok, n_blocks, block) like the host quantizers return them."""
    xs = np.ascontiguousarray(x, dtype=np.float32)
    if xs.ndim != 2 or xs.shape[0] < 1:
        raise Ds4Error(f"quantize: activations {xs.shape} must be (n_tok, cols)")
    n_tok, cols = xs.shape
    _check_cols(cols, block)
    rt = rt or runtime()
    n_blocks = n_tok * cols // block
    xb, cb, sb = (rt.scratch("quant.x", xs.nbytes), rt.scratch("quant.codes", xs.size),
                  rt.scratch("quant.scales", n_blocks * 4))  # fmt: skip
    bb = rt.scratch("quant.bsums", n_blocks * 16 * 4)
    xb.write(xs)
    if block == Q8_0_BLOCK:
        rt.run(lambda rec: record_quantize_q8_0(rec, xb, cb, sb, n_tok, cols))
    else:
        rt.run(lambda rec: record_quantize_q8_k(rec, xb, cb, sb, bb, n_tok, cols))
    codes = cb.read(np.int8, xs.size).astype(np.int32).reshape(n_tok, -1, block)
    scales = sb.read(np.float32, n_blocks).reshape(n_tok, -1)
    if block == Q8_0_BLOCK:
        return QuantizedActivation(codes, scales)
    bsums = bb.read(np.int32, n_blocks * 16).reshape(n_tok, -1, 16)
    return QuantizedActivation(codes, scales, bsums)


def record_quantize_q8_0(
    rec: Recorder, x: Buffer, codes: Buffer, scales: Buffer, n_tok: int, cols: int,
    x_offset: int = 0,
) -> None:  # fmt: skip
    """Record Q8_0 codes (int8, n_tok x cols) and scales (f32 per 32) of x (n_tok, cols)
    read from float x_offset of x."""
    _check_cols(cols, Q8_0_BLOCK)
    n_blocks = n_tok * cols // Q8_0_BLOCK
    groups = -(-n_blocks // WG)
    gx = min(groups, MAX_GROUPS)
    push = struct.pack("<II", n_blocks, x_offset)
    rec.dispatch("quant_q8_0", [x, codes, scales], push, (gx, -(-groups // gx), 1))


def record_quantize_q8_k(
    rec: Recorder, x: Buffer, codes: Buffer, scales: Buffer, bsums: Buffer, n_tok: int,
    cols: int, x_offset: int = 0,
) -> None:  # fmt: skip
    """Record Q8_K codes, scales (f32 per 256) and bsums (16 int32 per 256) of x."""
    _check_cols(cols, Q8_K_BLOCK)
    n_blocks = n_tok * cols // Q8_K_BLOCK
    gx = min(n_blocks, MAX_GROUPS)
    push = struct.pack("<II", n_blocks, x_offset)
    rec.dispatch("quant_q8_k", [x, codes, scales, bsums], push, (gx, -(-n_blocks // gx), 1))


def activation_buffers(w: VulkanWeights, n_tok: int, *, device: bool = True) -> list[Buffer]:
    """New [codes, scales, y, bsums] buffers for record_matmul_q8 with n_tok tokens of w
    (device-local unless device=False); the caller releases them."""
    block = _block_for(w)
    n_blocks = n_tok * w.cols // block
    make = w.rt.device_buffer if device else w.rt.host_buffer
    return [make(max(n_tok * w.cols, 4)), make(n_blocks * 4), make(n_tok * w.rows * 4),
            make(max(n_blocks * 16 * 4, 4))]  # fmt: skip


def record_quantize_for(
    rec: Recorder, w: VulkanWeights, x: Buffer, acts: list[Buffer], n_tok: int,
    x_offset: int = 0,
) -> None:  # fmt: skip
    """Record the quantization of x (n_tok, w.cols) that w's ds4-numerics product needs,
    into acts = [codes, scales, y, bsums] as record_matmul_q8 reads them (a barrier must
    follow before the product)."""
    if _block_for(w) == Q8_0_BLOCK:
        record_quantize_q8_0(rec, x, acts[0], acts[1], n_tok, w.cols, x_offset)
    else:
        record_quantize_q8_k(rec, x, acts[0], acts[1], acts[3], n_tok, w.cols, x_offset)


def _block_for(w: VulkanWeights) -> int:
    if w.ggml_type is GGMLType.Q8_0:
        return Q8_0_BLOCK
    if w.ggml_type in (GGMLType.Q2_K, GGMLType.Q4_K, GGMLType.IQ2_XXS):
        return Q8_K_BLOCK
    raise Ds4Error(f"no quantized-activation Vulkan kernel for {w.ggml_type.name} weights")


def _check_cols(cols: int, block: int) -> None:
    if block not in (Q8_0_BLOCK, Q8_K_BLOCK):
        raise Ds4Error(f"quantize: block {block} is neither Q8_0's 32 nor Q8_K's 256")
    if cols < block or cols % block:
        raise Ds4Error(f"quantize: {cols} values per token are not whole blocks of {block}")
