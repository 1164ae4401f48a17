"""Weights resident on the GPU and the products over them (docs/vulkan.md#kernels).

Weights are uploaded once as their raw GGUF block bytes (`upload_weights`; a 3-D expert
tensor as one buffer, experts addressed by offset) and the shaders decode them in
registers. fp32 numerics: f32 dots against f32 activations (`record_matmul`). ds4
numerics: quantized weights take integer dots (`record_matmul_q8`) against activations
quantized as the engine's own quantizers do, on the host (`stage_activations`) or on the
device (`record_quantize_for`); F32/F16/BF16 weights keep the f32 dots. `VulkanWeightStore`
serves both the device forward and the reference forward's host path.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.forward import WeightStore
from ds4.adapters.compute.vulkan.device import Buffer
from ds4.adapters.compute.vulkan.runtime import MAX_GROUPS, Recorder, VulkanRuntime, runtime
from ds4.domain.engine_math.lowprec import Numerics
from ds4.domain.engine_math.quant_dots import QuantizedActivation, quantize_q8_0, quantize_q8_k
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType
from ds4.domain.gguf.iq2xxs_tables import IQ2XXS_LEVELS
from ds4.domain.gguf.iq_grids import IQ2XS_GRID, IQ3S_GRID, IQ3XXS_GRID
from ds4.domain.gguf.quant_formats import FORMATS_BY_TYPE
from ds4.ports.model_file import Dequantizer, ModelFile

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

SHADERS = {
    GGMLType.F32: "matvec_f32",
    GGMLType.F16: "matvec_f16",
    GGMLType.Q8_0: "matvec_q8_0",
    GGMLType.Q2_K: "matvec_q2_k",
    GGMLType.Q4_K: "matvec_q4_k",
    GGMLType.IQ2_XXS: "matvec_iq2_xxs",
    GGMLType.MXFP4: "matvec_mxfp4",
    GGMLType.BF16: "matvec_bf16",
    GGMLType.Q3_K: "matvec_q3_k",
    GGMLType.Q5_K: "matvec_q5_k",
    GGMLType.Q6_K: "matvec_q6_k",
    GGMLType.IQ4_NL: "matvec_iq4_nl",
    GGMLType.IQ4_XS: "matvec_iq4_xs",
    GGMLType.IQ2_XS: "matvec_iq2_xs",
    GGMLType.IQ3_XXS: "matvec_iq3_xxs",
    GGMLType.IQ3_S: "matvec_iq3_s",
}
TOKENS_PER_GROUP = 8  # NT in native/vulkan/matvec_common.glsl


@dataclass
class VulkanWeights:
    """A 2-D weight tensor resident on the device as raw blocks."""

    rt: VulkanRuntime
    buffer: Buffer
    ggml_type: GGMLType
    rows: int
    cols: int
    row_bytes: int
    offset: int = 0  # byte offset of row 0 in buffer (views of expert tensors, row ranges)

    def view(self, first_row: int, rows: int) -> VulkanWeights:
        """rows [first_row, first_row + rows) of this tensor, sharing its buffer."""
        if first_row < 0 or rows < 1 or first_row + rows > self.rows:
            raise Ds4Error(f"rows {first_row}..{first_row + rows} outside 0..{self.rows}")
        return VulkanWeights(self.rt, self.buffer, self.ggml_type, rows, self.cols,
                             self.row_bytes, self.offset + first_row * self.row_bytes)  # fmt: skip

    def release(self) -> None:
        self.buffer.release()


def upload_weights(
    raw: U8, ggml_type: GGMLType | int, cols: int, *, rt: VulkanRuntime | None = None
) -> VulkanWeights:
    """Upload raw block rows (rows, row_bytes) holding `cols` values each."""
    kind = _kind(ggml_type)
    geo = BLOCK_GEOMETRY[kind]
    if raw.ndim != 2 or raw.dtype != np.uint8:
        raise Ds4Error(f"weights must be 2-D uint8 block rows, got {raw.dtype} {raw.shape}")
    if cols <= 0 or cols % geo.elements or raw.shape[1] != cols // geo.elements * geo.nbytes:
        raise Ds4Error(f"{kind.name}: {raw.shape[1]} bytes per row do not hold {cols} values "
                       f"in whole {geo.elements}-value blocks")  # fmt: skip
    rows = raw.shape[0]
    if rows < 1 or rows > MAX_GROUPS * MAX_GROUPS:
        raise Ds4Error(f"{kind.name}: {rows} rows out of range")
    rt = rt or runtime()
    return VulkanWeights(rt, rt.upload(raw), kind, rows, cols, int(raw.shape[1]))


def matmul(w: VulkanWeights, x: npt.ArrayLike) -> F32:
    """y[t] = W x[t] for x (n_tok, cols) -> (n_tok, rows)."""
    xs = np.ascontiguousarray(x, dtype=np.float32)
    if xs.ndim != 2 or xs.shape[1] != w.cols or xs.shape[0] < 1:
        raise Ds4Error(f"matmul: activations {xs.shape} do not fit weights of {w.cols} columns")
    rt = w.rt
    n_tok = xs.shape[0]
    x_buf = rt.scratch("matvec.x", xs.nbytes)
    y_buf = rt.scratch("matvec.y", n_tok * w.rows * 4)
    x_buf.write(xs)
    tables = kernel_tables(rt, w)
    rt.run(lambda rec: record_matmul(rec, w, x_buf, y_buf, n_tok, tables))
    out: F32 = y_buf.read(np.float32, n_tok * w.rows).reshape(n_tok, w.rows)
    return out


def matvec(w: VulkanWeights, x: npt.ArrayLike) -> F32:
    """y = W x for one activation vector (cols,) -> (rows,)."""
    xv = np.asarray(x, dtype=np.float32)
    if xv.ndim != 1:
        raise Ds4Error(f"matvec takes one activation vector, got shape {xv.shape}")
    y: F32 = matmul(w, xv[None, :])[0]
    return y


def kernel_tables(rt: VulkanRuntime, w: VulkanWeights) -> list[Buffer]:
    """The lookup tables w's shader reads, uploaded once (before recording: an upload is
    a submission of its own)."""
    if w.ggml_type is GGMLType.IQ2_XXS:
        return [rt.constant("iq2xxs.grid", np.array(IQ2XXS_LEVELS, dtype=np.uint32))]
    grid = _GRIDS.get(w.ggml_type)
    if grid is not None:  # packed one byte per position (native/vulkan/iq_grid_fields.glsl)
        name, entries, dtype = grid
        return [rt.constant(name, np.array(entries, dtype=dtype).view(np.uint32))]
    return []


_GRIDS: dict[GGMLType, tuple[str, tuple[int, ...], str]] = {
    GGMLType.IQ2_XS: ("iq2xs.grid", IQ2XS_GRID, "<u8"),
    GGMLType.IQ3_XXS: ("iq3xxs.grid", IQ3XXS_GRID, "<u4"),
    GGMLType.IQ3_S: ("iq3s.grid", IQ3S_GRID, "<u4"),
}


def record_matmul(
    rec: Recorder, w: VulkanWeights, x: Buffer, y: Buffer, n_tok: int, tables: list[Buffer]
) -> None:
    """Record one matmul dispatch (for callers chaining kernels in one submission);
    `tables` from kernel_tables()."""
    buffers = [w.buffer, x, y, *tables]
    push = struct.pack("<5I", w.rows, w.cols, n_tok, w.row_bytes, w.offset)
    gx = min(w.rows, MAX_GROUPS)
    groups = (gx, -(-w.rows // gx), -(-n_tok // TOKENS_PER_GROUP))
    shader = SHADERS[w.ggml_type] + ("_decode" if n_tok == 1 else "")
    rec.dispatch(shader, buffers, push, groups)


def _kind(ggml_type: GGMLType | int) -> GGMLType:
    try:
        kind = GGMLType(int(ggml_type))
    except ValueError:
        raise Ds4Error(f"unknown GGML type {ggml_type}") from None
    if kind not in SHADERS:
        have = ", ".join(k.name for k in SHADERS)
        raise Ds4Error(f"the Vulkan kernels do not support {kind.name} weights (have {have})")
    return kind


# -----------------------------------------------------------------------------
# The ds4 numerics' weight products on the GPU: integer dots against quantized activations.
#
# The activation is quantized on the host by the engine's own quantizers (Q8_0 for Q8_0
# weights, Q8_K for the K-quants and IQ2_XXS; docs/reference/formats.md §5), so the codes
# are the cpu backend's bit for bit; the shaders form each block's integer dot and f32
# scale products as the reference does, and only the f32 order of the block sum differs.

SHADERS_Q8 = {
    GGMLType.Q8_0: "matvec_q8_0_q8",
    GGMLType.Q2_K: "matvec_q2_k_q8",
    GGMLType.Q4_K: "matvec_q4_k_q8",
    GGMLType.IQ2_XXS: "matvec_iq2_xxs_q8",
    GGMLType.MXFP4: "matvec_mxfp4_q8",
    GGMLType.Q3_K: "matvec_q3_k_q8",
    GGMLType.Q5_K: "matvec_q5_k_q8",
    GGMLType.Q6_K: "matvec_q6_k_q8",
    GGMLType.IQ4_NL: "matvec_iq4_nl_q8",
    GGMLType.IQ4_XS: "matvec_iq4_xs_q8",
    GGMLType.IQ2_XS: "matvec_iq2_xs_q8",
    GGMLType.IQ3_XXS: "matvec_iq3_xxs_q8",
    GGMLType.IQ3_S: "matvec_iq3_s_q8",
}


def per32_activation(ggml_type: GGMLType) -> bool:
    """Whether the type's integer dot reads per-32 Q8_0 activations (else Q8_K)."""
    return FORMATS_BY_TYPE[ggml_type].activation == "q8_0"


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
    act = quantize_q8_0(xs) if per32_activation(w.ggml_type) else quantize_q8_k(xs)
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


# -----------------------------------------------------------------------------
# ds4 numerics' activation quantization on the GPU (native/vulkan/quant_q8_*.comp).
#
# The codes, scales and Q8_K block sums equal the engine's own quantizers
# (domain/engine_math/quant_dots.py, which matvec_q8.stage_activations runs on the host)
# bit for bit: the scale divisions are rounded exactly (div_rn.glsl), the codes round half
# to even. Outside that guarantee: non-finite inputs, and blocks whose largest |x| is below
# 127 * 2^-126 (the device may flush the subnormal scale to zero). docs/vulkan.md#kernels.

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
    if w.ggml_type in SHADERS_Q8:
        return Q8_0_BLOCK if per32_activation(w.ggml_type) else Q8_K_BLOCK
    raise Ds4Error(f"no quantized-activation Vulkan kernel for {w.ggml_type.name} weights")


def _check_cols(cols: int, block: int) -> None:
    if block not in (Q8_0_BLOCK, Q8_K_BLOCK):
        raise Ds4Error(f"quantize: block {block} is neither Q8_0's 32 nor Q8_K's 256")
    if cols < block or cols % block:
        raise Ds4Error(f"quantize: {cols} values per token are not whole blocks of {block}")


# -----------------------------------------------------------------------------
# Weights resident on the GPU (`--backend vulkan`, docs/vulkan.md).
#
# Each weight tensor goes to the device once, as its raw GGUF blocks (a 3-D expert tensor
# as one buffer, experts addressed by offset): the device forward records its products
# over them (`device`), and `matmul` serves the reference forward's host path (steering,
# activation capture) with one submission per product. fp32
# numerics: f32 dots on the decoded weights. ds4 numerics: quantized weights take the
# integer dots against activations quantized on the host by the engine's quantizers
# (stage_activations); F32/F16 weights take the f32 dots (the reference sums F32 in f64 and
# F16 in index order: within the fast path's noise). A weight type without a shader is an
# error, never a quiet CPU product.


class VulkanWeightStore(WeightStore):
    def __init__(
        self, model: ModelFile, dequantizer: Dequantizer, numerics: Numerics, rt: VulkanRuntime
    ) -> None:
        if numerics.name == "exact":
            raise Ds4Error("--numerics exact runs on the native CPU backend (--backend cpu)")
        super().__init__(model, dequantizer, numerics)
        self._rt = rt
        self._resident: dict[str, VulkanWeights] = {}

    @property
    def resident_bytes(self) -> int:
        return sum(w.buffer.size for w in self._resident.values())

    @property
    def rt(self) -> VulkanRuntime:
        return self._rt

    @property
    def activation_quant(self) -> bool:
        return self._numerics.activation_quant

    def raw_tensor(self, name: str) -> npt.NDArray[np.uint8]:
        """The tensor's raw GGUF bytes (e.g. the hash-routing table, uploaded as is)."""
        raw: npt.NDArray[np.uint8] = self._model.raw(name)
        return raw

    def matmul(
        self, name: str, x: F32, *, rows: slice | None = None, expert: int | None = None
    ) -> F32:
        """y[t] = W x[t] on the device; the same contract as WeightStore.matmul."""
        w = self.device(name, rows=rows, expert=expert)
        xs = np.asarray(x, dtype=np.float32).reshape(-1, w.cols)
        if self._numerics.activation_quant and w.ggml_type in SHADERS_Q8:
            return matmul_q8(w, xs)
        return matmul(w, xs)

    def device(
        self, name: str, *, rows: slice | None = None, expert: int | None = None
    ) -> VulkanWeights:
        """The resident tensor `name` (uploaded on first use), or one expert's matrix or a
        plain range of its rows, as a view of the same buffer."""
        w = self._tensor(name)
        if expert is not None:
            per_expert = self._model.tensors[name].dims[1]
            if not 0 <= expert < w.rows // per_expert:
                raise Ds4Error(f"{name}: expert {expert} out of range")
            w = w.view(expert * per_expert, per_expert)
        if rows is not None:
            start, stop, step = rows.indices(w.rows)
            if step != 1 or stop <= start:
                raise Ds4Error(f"{name}: row range {rows} is not a plain non-empty slice")
            w = w.view(start, stop - start)
        return w

    def _tensor(self, name: str) -> VulkanWeights:
        have = self._resident.get(name)
        if have is None:
            info = self._model.tensors[name]
            if info.ggml_type not in SHADERS:
                raise Ds4Error(f"{name}: {info.ggml_type.name} weights have no Vulkan kernel yet")
            raw = self._model.raw(name)
            flat = raw.reshape(-1, raw.shape[-1])  # experts stacked row-wise, in order
            have = upload_weights(flat, info.ggml_type, info.dims[0], rt=self._rt)
            self._resident[name] = have
        return have
