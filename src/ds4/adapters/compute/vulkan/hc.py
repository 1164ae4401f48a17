"""Hyper-connections on the GPU: HC pre (flat RMSNorm, the hc_*_fn mix product, the
split with Sinkhorn, the pre-weighted stream sum), HC post, and the head's stream
collapse (native/vulkan/hc_split.comp, hc_post.comp; docs/vulkan.md#kernels).

The split follows domain/engine_math/layers.py operation by operation in f32; only the
device's exp differs from the reference's correctly rounded one (a few ulp).
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.matvec import VulkanWeights, kernel_tables, record_matmul
from ds4.adapters.compute.vulkan.norm import record_rmsnorm
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS, Recorder
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
MAX_HC = 8  # MAX_HC in hc_split.comp
WG = 64
LAYER, HEAD = 0, 1  # hc_split modes


def split_width(n_hc: int, mode: int = LAYER) -> int:
    """Values per token of the mix and of the split: 2S + S*S for a layer, S for the head."""
    return 2 * n_hc + n_hc * n_hc if mode == LAYER else n_hc


def hc_pre(
    streams: npt.ArrayLike, fn: VulkanWeights, scale: npt.ArrayLike, base: npt.ArrayLike, *,
    iters: int, hc_eps: float, rms_eps: float, mode: int = LAYER,
) -> tuple[F32, F32]:  # fmt: skip
    """streams (n, S, D) -> (x (n, D), split (n, width)): one submission, f32 products."""
    xs = np.ascontiguousarray(streams, dtype=np.float32)
    if xs.ndim != 3:
        raise Ds4Error(f"hc_pre: streams {xs.shape} must be (n_tok, n_hc, dim)")
    n_tok, n_hc, dim = xs.shape
    width = split_width(n_hc, mode)
    sc = np.ascontiguousarray(scale, dtype=np.float32).reshape(-1)
    bs = np.ascontiguousarray(base, dtype=np.float32).reshape(-1)
    _check(n_tok, n_hc, dim, iters, mode)
    if (
        fn.cols != n_hc * dim
        or fn.rows != width
        or bs.size != width
        or sc.size < 1 + 2 * (mode == LAYER)
    ):
        raise Ds4Error(f"hc_pre: fn {fn.rows}x{fn.cols}, scale {sc.size}, base {bs.size} do "
                       f"not fit {n_hc} streams of {dim}")  # fmt: skip
    rt = fn.rt
    bufs = _host(rt, "hc", xs, sc, bs)
    flat = rt.scratch("hc.flat", xs.nbytes)
    mix = rt.scratch("hc.mix", n_tok * width * 4)
    split = rt.scratch("hc.split", n_tok * width * 4)
    x_out = rt.scratch("hc.x", n_tok * dim * 4)
    tables = kernel_tables(rt, fn)

    def record(rec: Recorder) -> None:
        record_hc_pre(rec, bufs[0], fn, tables, bufs[1], bufs[2], flat, mix, split, x_out,
                      n_tok, n_hc, dim, iters, hc_eps, rms_eps, mode)  # fmt: skip

    rt.run(record)
    x: F32 = x_out.read(np.float32, n_tok * dim).reshape(n_tok, dim)
    sp: F32 = split.read(np.float32, n_tok * width).reshape(n_tok, width)
    return x, sp


def hc_post(y: npt.ArrayLike, streams: npt.ArrayLike, split: npt.ArrayLike,
            rt: VulkanRuntime) -> F32:  # fmt: skip
    """New streams (n, S, D) from the sublayer output y (n, D) and hc_pre's layer split."""
    ys = np.ascontiguousarray(y, dtype=np.float32)
    xs = np.ascontiguousarray(streams, dtype=np.float32)
    sp = np.ascontiguousarray(split, dtype=np.float32)
    if xs.ndim != 3 or ys.shape != (xs.shape[0], xs.shape[2]):
        raise Ds4Error(f"hc_post: y {ys.shape} does not fit streams {xs.shape}")
    n_tok, n_hc, dim = xs.shape
    _check(n_tok, n_hc, dim, 1, LAYER)
    if sp.shape != (n_tok, split_width(n_hc)):
        raise Ds4Error(f"hc_post: split {sp.shape} is not (n_tok, 2S + S*S)")
    yb, sb, pb = _host(rt, "hcpost", ys, xs, sp)
    out = rt.scratch("hcpost.out", xs.nbytes)
    rt.run(lambda rec: record_hc_post(rec, yb, sb, pb, out, n_tok, n_hc, dim))
    res: F32 = out.read(np.float32, xs.size).reshape(xs.shape)
    return res


def record_hc_pre(
    rec: Recorder, streams: Buffer, fn: VulkanWeights, tables: list[Buffer], scale: Buffer,
    base: Buffer, flat: Buffer, mix: Buffer, split: Buffer, x_out: Buffer, n_tok: int,
    n_hc: int, dim: int, iters: int, hc_eps: float, rms_eps: float, mode: int = LAYER,
) -> None:  # fmt: skip
    """Record flat RMSNorm -> fn product -> split and weighted sum, barriers between
    (fp32 numerics; `tables` from kernel_tables(fn)). Scratch: flat (n, S*D), mix
    (n, width); results: split (n, width), x_out (n, D)."""
    record_rmsnorm(rec, streams, scale, flat, n_hc * dim, n_tok, rms_eps, False)
    rec.barrier()
    record_matmul(rec, fn, flat, mix, n_tok, tables)
    rec.barrier()
    record_hc_split(rec, mix, scale, base, streams, split, x_out, n_tok, n_hc, dim, iters,
                    hc_eps, mode)  # fmt: skip


def record_hc_split(
    rec: Recorder, mix: Buffer, scale: Buffer, base: Buffer, streams: Buffer, split: Buffer,
    x_out: Buffer, n_tok: int, n_hc: int, dim: int, iters: int, eps: float, mode: int = LAYER,
) -> None:  # fmt: skip
    """Record the split of mix (n, width) into split (n, width) and x_out = sum_h pre[h] *
    streams[h] (n, D); mode LAYER (pre, post, Sinkhorn comb) or HEAD (pre only)."""
    _check(n_tok, n_hc, dim, iters, mode)
    push = struct.pack("<4IfI", n_tok, n_hc, dim, iters, eps, mode)
    gx = min(n_tok, MAX_GROUPS)
    rec.dispatch("hc_split", [mix, scale, base, streams, split, x_out], push,
                 (gx, -(-n_tok // gx), 1))  # fmt: skip


def record_hc_post(
    rec: Recorder, y: Buffer, streams: Buffer, split: Buffer, out: Buffer, n_tok: int,
    n_hc: int, dim: int,
) -> None:  # fmt: skip
    """Record out (n, S, D) = post * y + comb-mixed streams (out must not alias streams)."""
    push = struct.pack("<3I", n_tok, n_hc, dim)
    groups = -(-(n_tok * dim) // WG)
    gx = min(groups, MAX_GROUPS)
    rec.dispatch("hc_post", [y, streams, split, out], push, (gx, -(-groups // gx), 1))


def _check(n_tok: int, n_hc: int, dim: int, iters: int, mode: int) -> None:
    if not 1 <= n_hc <= MAX_HC or dim < 1 or n_tok < 1 or mode not in (LAYER, HEAD):
        raise Ds4Error(f"hc: {n_tok} tokens of {n_hc} streams x {dim} (streams 1..{MAX_HC})")
    if mode == LAYER and iters < 1:
        raise Ds4Error(f"hc: {iters} Sinkhorn iterations (need at least 1)")


def _host(rt: VulkanRuntime, tag: str, *arrays: F32) -> list[Buffer]:
    bufs = [rt.scratch(f"{tag}.in{i}", a.nbytes) for i, a in enumerate(arrays)]
    for buf, a in zip(bufs, arrays, strict=True):
        buf.write(a)
    return bufs
