"""The ds4 numerics' rounding of cached rows on the GPU, in place
(native/vulkan/store_round.comp; docs/vulkan.md#kernels).

KV_ROW: the reference's f16round(fp8_kv_sim(row, n_nope)) (raw and compressed attention
rows); INDEX_ROW: f16round(indexer_qat(row)) (indexer compressor rows); INDEX_QUERY:
indexer_qat(iq) per 128-wide head (indexer queries). Bit for bit, except for non-finite
values and values whose rounding passes through f32 subnormals.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime, runtime
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS, Recorder
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
MAX_DIM = 512


class StoreRounding(IntEnum):
    KV_ROW = 0
    INDEX_ROW = 1
    INDEX_QUERY = 2


def round_rows(
    x: npt.ArrayLike, mode: StoreRounding, *, n_nope: int = 0, rt: VulkanRuntime | None = None
) -> F32:
    """x (n_rows, dim) rounded as `mode` says; n_nope: KV_ROW's FP8 dims."""
    xs = np.ascontiguousarray(x, dtype=np.float32)
    if xs.ndim != 2 or xs.shape[0] < 1:
        raise Ds4Error(f"store rounding: rows {xs.shape} must be (n_rows, dim)")
    rt = rt or runtime()
    buf = rt.scratch("store_round.rows", xs.nbytes)
    buf.write(xs)
    rt.run(lambda rec: record_store_round(rec, buf, n_rows=xs.shape[0], dim=xs.shape[1],
                                          mode=mode, n_nope=n_nope))  # fmt: skip
    out: F32 = buf.read(np.float32, xs.size).reshape(xs.shape)
    return out


def record_store_round(
    rec: Recorder, rows: Buffer, *, n_rows: int, dim: int, mode: StoreRounding, row0: int = 0,
    n_nope: int = 0,
) -> None:  # fmt: skip
    """Record the in-place rounding of rows row0 .. row0 + n_rows (each of dim f32)."""
    if not 1 <= dim <= MAX_DIM or n_rows < 1 or row0 < 0:
        raise Ds4Error(f"store rounding: {n_rows} rows of {dim} (at most {MAX_DIM}) at {row0}")
    if mode is StoreRounding.KV_ROW and (n_nope % 64 or not 0 <= n_nope <= dim):
        raise Ds4Error(f"store rounding: {n_nope} FP8 dims are not whole blocks of 64 in {dim}")
    if mode is not StoreRounding.KV_ROW and dim % 128:
        raise Ds4Error(f"store rounding: the Hadamard needs rows of 128s, not {dim}")
    gx = min(n_rows, MAX_GROUPS)
    push = struct.pack("<5I", n_rows, dim, row0, int(mode), n_nope)
    rec.dispatch("store_round", [rows], push, (gx, -(-n_rows // gx), 1))
