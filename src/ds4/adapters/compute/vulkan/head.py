"""The output head on the GPU (docs/vulkan.md#kernels): the final streams' flat RMSNorm,
the HC head's mix product and stable-sigmoid stream weights (hc_split.comp in HEAD
mode), their weighted sum, RMSNorm with output_norm, and the output product.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.hc import HEAD, record_hc_pre
from ds4.adapters.compute.vulkan.matvec import VulkanWeights, kernel_tables, record_matmul
from ds4.adapters.compute.vulkan.norm import record_rmsnorm
from ds4.adapters.compute.vulkan.submission import Recorder
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]


@dataclass
class HeadWeights:
    """hc_fn (S, S*D), hc_scale (>= 1) / hc_base (S) and output_norm (D) as device
    buffers, and the output matrix (V, D)."""

    hc_fn: VulkanWeights
    hc_scale: Buffer
    hc_base: Buffer
    norm: Buffer
    output: VulkanWeights
    n_hc: int

    @property
    def dim(self) -> int:
        return self.output.cols


def head_logits(w: HeadWeights, streams: npt.ArrayLike, *, hc_eps: float,
                rms_eps: float) -> F32:  # fmt: skip
    """Logits (n, V) from final streams (n, S, D), one submission, fp32 numerics."""
    xs = np.ascontiguousarray(streams, dtype=np.float32)
    if xs.ndim != 3 or xs.shape[1:] != (w.n_hc, w.dim) or xs.shape[0] < 1:
        raise Ds4Error(f"head: streams {xs.shape} are not (n, {w.n_hc}, {w.dim})")
    rt = w.output.rt
    n_tok = xs.shape[0]
    sb = rt.scratch("head.streams", xs.nbytes)
    sb.write(xs)
    logits = rt.scratch("head.logits", n_tok * w.output.rows * 4)
    scratch = [rt.device_buffer(n) for n in (xs.nbytes, n_tok * w.n_hc * 4,
                                             n_tok * w.n_hc * 4, n_tok * w.dim * 4,
                                             n_tok * w.dim * 4)]  # fmt: skip
    tables = (kernel_tables(rt, w.hc_fn), kernel_tables(rt, w.output))
    try:
        rt.run(lambda rec: record_head(rec, w, tables, sb, scratch, logits, n_tok, hc_eps,
                                       rms_eps))  # fmt: skip
    finally:
        for buf in scratch:
            buf.release()
    out: F32 = logits.read(np.float32, n_tok * w.output.rows).reshape(n_tok, w.output.rows)
    return out


def record_head(
    rec: Recorder, w: HeadWeights, tables: tuple[list[Buffer], list[Buffer]], streams: Buffer,
    scratch: list[Buffer], logits: Buffer, n_tok: int, hc_eps: float, rms_eps: float,
) -> None:  # fmt: skip
    """Record logits (n, V) from streams (n, S, D), barriers between; scratch = [flat
    (n, S*D), mix (n, S), weights (n, S), collapsed (n, D), normed (n, D)] f32 buffers;
    tables = kernel_tables of hc_fn and output."""
    flat, mix, wts, x, z = scratch
    record_hc_pre(rec, streams, w.hc_fn, tables[0], w.hc_scale, w.hc_base, flat, mix, wts, x,
                  n_tok, w.n_hc, w.dim, 1, hc_eps, rms_eps, HEAD)  # fmt: skip
    rec.barrier()
    record_rmsnorm(rec, x, w.norm, z, w.dim, n_tok, rms_eps, True)
    rec.barrier()
    record_matmul(rec, w.output, z, logits, n_tok, tables[1])
