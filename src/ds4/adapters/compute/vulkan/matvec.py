"""Quantized matvec / matmul on the GPU over raw GGUF blocks (docs/vulkan.md#kernels).

Weights are uploaded once as their block bytes (`upload_weights`); the shaders decode
them in registers and dot them with f32 activations in f32 (no activation quantization:
this is the fp32 numerics path). One call is one submission.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime, runtime
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS, Recorder
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType
from ds4.domain.gguf.iq2xxs_tables import IQ2XXS_LEVELS

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

SHADERS = {
    GGMLType.F32: "matvec_f32",
    GGMLType.F16: "matvec_f16",
    GGMLType.Q8_0: "matvec_q8_0",
    GGMLType.Q2_K: "matvec_q2_k",
    GGMLType.Q4_K: "matvec_q4_k",
    GGMLType.IQ2_XXS: "matvec_iq2_xxs",
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
    return []


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
