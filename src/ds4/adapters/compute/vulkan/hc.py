"""The streams on the GPU: the token embedding into all n_hc streams, hyper-connections
(HC pre: flat RMSNorm, the hc_*_fn mix product, the split with Sinkhorn, the
pre-weighted stream sum; HC post), and the output head (the streams' collapse, RMSNorm
with output_norm, the output product) (native/vulkan/embed_rows.comp, hc_split.comp,
hc_post.comp; docs/vulkan.md#kernels).

The split follows domain/engine_math/layers.py operation by operation in f32; only the
device's exp differs from the reference's correctly rounded one (a few ulp).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.device import Buffer
from ds4.adapters.compute.vulkan.ops import record_rmsnorm
from ds4.adapters.compute.vulkan.runtime import MAX_GROUPS, Recorder, VulkanRuntime
from ds4.adapters.compute.vulkan.weights import VulkanWeights, kernel_tables, record_matmul
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType

F32 = npt.NDArray[np.float32]
MAX_HC = 8  # MAX_HC in hc_split.comp
WG = 64
LAYER, HEAD = 0, 1  # hc_split modes


@dataclass(frozen=True)
class HcShape:
    """n_tok tokens of n_hc streams of dim, the Sinkhorn iterations, the split's hc_eps,
    the flat RMSNorm's rms_eps, and the hc_split mode (LAYER or HEAD)."""

    n_tok: int
    n_hc: int
    dim: int
    iters: int
    hc_eps: float
    rms_eps: float
    mode: int = LAYER


@dataclass(frozen=True)
class HcBuffers:
    """One HC pre's buffers: streams (n, S, D) in, the scale and base weights, mix
    (n, width) the fn product, split (n, width) and x (n, D) out; flat (n, S*D) is
    record_hc_pre's RMSNorm scratch (record_hc_split does not read it)."""

    streams: Buffer
    scale: Buffer
    base: Buffer
    mix: Buffer
    split: Buffer
    x: Buffer
    flat: Buffer | None = None


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

    b = HcBuffers(bufs[0], bufs[1], bufs[2], mix, split, x_out, flat)
    s = HcShape(n_tok, n_hc, dim, iters, hc_eps, rms_eps, mode)
    rt.run(lambda rec: record_hc_pre(rec, fn, tables, b, s))
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
    rec: Recorder, fn: VulkanWeights, tables: list[Buffer], b: HcBuffers, s: HcShape
) -> None:
    """Record flat RMSNorm -> fn product -> split and weighted sum, barriers between
    (fp32 numerics; `tables` from kernel_tables(fn)); b.flat is the RMSNorm's scratch."""
    if b.flat is None:
        raise Ds4Error("hc_pre: no flat scratch buffer (n, S*D)")
    record_rmsnorm(rec, b.streams, b.scale, b.flat, s.n_hc * s.dim, s.n_tok, s.rms_eps, False)
    rec.barrier()
    record_matmul(rec, fn, b.flat, b.mix, s.n_tok, tables)
    rec.barrier()
    record_hc_split(rec, b, s)


def record_hc_split(rec: Recorder, b: HcBuffers, s: HcShape) -> None:
    """Record the split of b.mix (n, width) into b.split (n, width) and b.x = sum_h pre[h] *
    streams[h] (n, D); mode LAYER (pre, post, Sinkhorn comb) or HEAD (pre only)."""
    n_tok, n_hc, dim, iters, mode = s.n_tok, s.n_hc, s.dim, s.iters, s.mode
    _check(n_tok, n_hc, dim, iters, mode)
    push = struct.pack("<4IfI", n_tok, n_hc, dim, iters, s.hc_eps, mode)
    gx = min(n_tok, MAX_GROUPS)
    rec.dispatch("hc_split", [b.mix, b.scale, b.base, b.streams, b.split, b.x], push,
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


# -----------------------------------------------------------------------------
# The output head on the GPU (docs/vulkan.md#kernels): the final streams' flat RMSNorm,
# the HC head's mix product and stable-sigmoid stream weights (hc_split.comp in HEAD
# mode), their weighted sum, RMSNorm with output_norm, and the output product.


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
    flat, mix, wts, x, z = scratch
    b = HeadBuffers(sb, flat, mix, wts, x, z, logits)
    try:
        rt.run(lambda rec: record_head(rec, w, tables, b, n_tok, hc_eps, rms_eps))
    finally:
        for buf in scratch:
            buf.release()
    out: F32 = logits.read(np.float32, n_tok * w.output.rows).reshape(n_tok, w.output.rows)
    return out


@dataclass(frozen=True)
class HeadBuffers:
    """record_head's buffers: streams (n, S, D) in, f32 scratch flat (n, S*D), mix (n, S),
    weights (n, S), collapsed (n, D) and normed (n, D), logits (n, V) out."""

    streams: Buffer
    flat: Buffer
    mix: Buffer
    weights: Buffer
    collapsed: Buffer
    normed: Buffer
    logits: Buffer


def record_head(
    rec: Recorder, w: HeadWeights, tables: tuple[list[Buffer], list[Buffer]], b: HeadBuffers,
    n_tok: int, hc_eps: float, rms_eps: float,
) -> None:  # fmt: skip
    """Record b.logits (n, V) from b.streams (n, S, D), barriers between; tables =
    kernel_tables of hc_fn and output."""
    hc = HcBuffers(b.streams, w.hc_scale, w.hc_base, b.mix, b.weights, b.collapsed, b.flat)
    record_hc_pre(rec, w.hc_fn, tables[0], hc, HcShape(n_tok, w.n_hc, w.dim, 1, hc_eps,
                                                        rms_eps, HEAD))  # fmt: skip
    rec.barrier()
    record_rmsnorm(rec, b.collapsed, w.norm, b.normed, w.dim, n_tok, rms_eps, True)
    rec.barrier()
    record_matmul(rec, w.output, b.normed, b.logits, n_tok, tables[1])


# -----------------------------------------------------------------------------
# The token embedding on the GPU (native/vulkan/embed_rows.comp): each token's row of the
# resident F16/BF16/F32 token_embd, widened to f32 (exact) into all n_hc streams.

EMBED_TYPES = (GGMLType.F32, GGMLType.F16, GGMLType.BF16)  # push code: the index


def record_embed(
    rec: Recorder, table: VulkanWeights, ids: Buffer, out: Buffer, n_tok: int, n_hc: int
) -> None:
    """Record out (n_tok, n_hc, dim) = table[ids[t]] in every stream; ids uint32 in range
    (checked by the caller: the shader trusts them)."""
    if table.ggml_type not in EMBED_TYPES or table.offset or table.row_bytes % 4:
        raise Ds4Error(f"embedding: {table.ggml_type.name} rows have no Vulkan gather")
    if n_tok < 1 or n_hc < 1:
        raise Ds4Error(f"embedding: {n_tok} tokens, {n_hc} streams")
    groups = -(-(n_tok * table.cols) // WG)
    gx = min(groups, MAX_GROUPS)
    push = struct.pack("<5I", n_tok, table.cols, n_hc, table.row_bytes // 4,
                       EMBED_TYPES.index(table.ggml_type))  # fmt: skip
    rec.dispatch("embed_rows", [table.buffer, ids, out], push, (gx, -(-groups // gx), 1))
