"""RMSNorm on the GPU (native/vulkan/rmsnorm.comp; docs/vulkan.md#kernels)."""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime, runtime
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS, Recorder
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]


def rmsnorm(
    x: npt.ArrayLike, weight: npt.ArrayLike | None, eps: float, *, rt: VulkanRuntime | None = None
) -> F32:
    """RMSNorm over the last axis of x (any leading shape), optionally times weight."""
    xs = np.ascontiguousarray(x, dtype=np.float32)
    if xs.ndim == 0 or xs.shape[-1] == 0:
        raise Ds4Error(f"rmsnorm: cannot normalise shape {xs.shape}")
    dim = xs.shape[-1]
    n_rows = xs.size // dim
    if not 0.0 < eps < 1.0:
        raise Ds4Error(f"rmsnorm: eps {eps} outside (0, 1)")
    w = np.ones(dim, np.float32) if weight is None else np.ascontiguousarray(weight, np.float32)
    if w.shape != (dim,):
        raise Ds4Error(f"rmsnorm: weight {w.shape} does not match rows of {dim}")
    rt = rt or runtime()
    xb, wb, yb = (rt.scratch("norm.x", xs.nbytes), rt.scratch("norm.w", w.nbytes),
                  rt.scratch("norm.y", xs.nbytes))  # fmt: skip
    xb.write(xs)
    wb.write(w)
    rt.run(lambda rec: record_rmsnorm(rec, xb, wb, yb, dim, n_rows, eps, weight is not None))
    out: F32 = yb.read(np.float32, xs.size).reshape(xs.shape)
    return out


def record_rmsnorm(
    rec: Recorder, x: Buffer, weight: Buffer, y: Buffer, dim: int, n_rows: int, eps: float,
    weighted: bool,
) -> None:  # fmt: skip
    """Record y = rmsnorm(x) [* weight] over n_rows rows of dim (chained submissions)."""
    push = struct.pack("<IIfI", dim, n_rows, eps, int(weighted))
    gx = min(n_rows, MAX_GROUPS)
    rec.dispatch("rmsnorm", [x, weight, y], push, (gx, -(-n_rows // gx), 1))
