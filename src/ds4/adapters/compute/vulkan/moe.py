"""Routed experts and the shared expert on the GPU (docs/vulkan.md#kernels).

The (token, slot) pairs the router chose are grouped by expert on the device
(moe_group.comp: a permutation and a table of chunks of at most 8 pairs of one expert);
the expert-indexed matvec kernels (matvec_<type>_moe) then decode each expert row once
per chunk, for decode (k pairs, k chunks) and prefill alike. Expert e of a 3-D tensor is
rows [e * rows_per_expert, (e + 1) * rows_per_expert) of the one uploaded buffer.
SwiGLU with the clamp (swiglu.comp) and the slot-ordered combine with the shared expert
(moe_combine.comp) follow domain/engine_math/layers.py and reference/forward.py.

fp32 numerics: f32 dots throughout (record_moe_ffn). ds4 numerics (record_moe_ffn_q8):
quantized weights take the integer-dot kernels over activations quantized on the device
by a `quantize` recorder (the activation quantizer's record_quantize_for), g once per
block size for gate/up, the SwiGLU outputs per pair for down; F32/F16 weights keep the
f32 dots, as the reference's weight store does.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.device import Buffer
from ds4.adapters.compute.vulkan.runtime import MAX_GROUPS, Recorder, VulkanRuntime
from ds4.adapters.compute.vulkan.weights import (
    SHADERS,
    SHADERS_Q8,
    TOKENS_PER_GROUP,
    VulkanWeights,
    kernel_tables,
    per32_activation,
    record_matmul,
    record_matmul_q8,
    stage_activations,
)
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
# record_quantize_for(rec, w, x, acts, n_rows): quantize x (n_rows, w.cols) as w's
# ds4-numerics product reads it into acts = [codes, scales, y (untouched), bsums].
Quantize = Callable[[Recorder, VulkanWeights, Buffer, list[Buffer], int], None]
MAX_EXPERT = 1024  # MAX_EXPERT in moe_group.comp
WG = 64


def max_chunks(n_pairs: int, n_expert: int) -> int:
    """An upper bound of moe_group's chunk count: sum_e ceil(c_e / 8) <= n/8 + used experts."""
    return n_pairs // TOKENS_PER_GROUP + min(n_expert, n_pairs)


def chunk_table_bytes(n_pairs: int, n_expert: int) -> int:
    return 4 * (1 + 3 * max_chunks(n_pairs, n_expert))


@dataclass
class FfnWeights:
    """One layer's FFN on the device: 3-D expert tensors (experts stacked row-wise) and
    the shared expert's matrices (None where the model has none)."""

    gate_exps: VulkanWeights
    up_exps: VulkanWeights
    down_exps: VulkanWeights
    n_expert: int
    shared: tuple[VulkanWeights, VulkanWeights, VulkanWeights] | None = None
    tables: dict[str, list[Buffer]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        g, u, d = self.gate_exps, self.up_exps, self.down_exps
        if not 1 <= self.n_expert <= MAX_EXPERT or any(w.rows % self.n_expert for w in (g, u, d)):
            raise Ds4Error(f"moe: {self.n_expert} experts do not divide the expert tensors")
        ff = g.rows // self.n_expert
        if (
            u.rows != g.rows
            or u.cols != g.cols
            or d.cols != ff
            or d.rows // self.n_expert != g.cols
        ):
            raise Ds4Error(f"moe: expert tensors gate {g.rows}x{g.cols}, up {u.rows}x{u.cols}, "
                           f"down {d.rows}x{d.cols} do not chain")  # fmt: skip
        if self.shared is not None:
            sg, su, sd = self.shared
            if sg.cols != g.cols or su.rows != sg.rows or sd.cols != sg.rows or sd.rows != g.cols:
                raise Ds4Error("moe: shared expert shapes do not fit the routed experts")
        for name, w in self._all():
            self.tables[name] = kernel_tables(w.rt, w)

    @property
    def dim(self) -> int:
        return self.gate_exps.cols

    @property
    def ff(self) -> int:
        return self.gate_exps.rows // self.n_expert

    def _all(self) -> list[tuple[str, VulkanWeights]]:
        named = [("gate", self.gate_exps), ("up", self.up_exps), ("down", self.down_exps)]
        if self.shared is not None:
            named += list(zip(("sh_gate", "sh_up", "sh_down"), self.shared, strict=True))
        return named


@dataclass(frozen=True)
class FfnBuffers:
    """The routed FFN's inputs and output for record_moe_ffn(_q8): g (n, D) the
    ffn-normed input, ids/wts (n, k) int32/f32 as record_route writes them, out (n, D)."""

    g: Buffer
    ids: Buffer
    wts: Buffer
    out: Buffer


@dataclass(frozen=True)
class ExpertGroups:
    """n_pairs (token, slot) pairs grouped by expert as record_moe_group writes them: perm
    (n_pairs u32) and the chunk table (chunk_table_bytes(n_pairs, n_expert) bytes)."""

    perm: Buffer
    chunks: Buffer
    n_pairs: int
    n_expert: int


@dataclass
class FfnScratch:
    """Device intermediates of record_moe_ffn for up to n_tok tokens of k slots."""

    n_tok: int
    k: int
    bufs: dict[str, Buffer]

    def release(self) -> None:
        for buf in self.bufs.values():
            buf.release()


def ffn_scratch(
    rt: VulkanRuntime, w: FfnWeights, n_tok: int, k: int, *, quantized: bool = False
) -> FfnScratch:
    """Device buffers for record_moe_ffn (quantized=True: also the activation codes of
    record_moe_ffn_q8) with up to n_tok tokens of k slots."""
    sizes = ffn_scratch_sizes(w, n_tok, k, quantized=quantized)
    return FfnScratch(n_tok, k, {name: rt.device_buffer(n) for name, n in sizes.items()})


def ffn_scratch_sizes(w: FfnWeights, n_tok: int, k: int, *, quantized: bool) -> dict[str, int]:
    """Bytes of each ffn_scratch buffer (for callers that allocate them their own way)."""
    n_pairs = n_tok * k
    sizes = {"perm": n_pairs * 4, "chunks": chunk_table_bytes(n_pairs, w.n_expert),
             "gate": n_pairs * w.ff * 4, "up": n_pairs * w.ff * 4, "mid": n_pairs * w.ff * 4,
             "contrib": n_pairs * w.dim * 4}  # fmt: skip
    if w.shared is not None:
        ffs = w.shared[0].rows
        sizes |= {"sh_gate": n_tok * ffs * 4, "sh_up": n_tok * ffs * 4,
                  "sh_mid": n_tok * ffs * 4, "sh_out": n_tok * w.dim * 4}  # fmt: skip
    if quantized:
        for tag, wt, rows in _quantized_inputs(w, n_tok, k):
            codes, scales, bsums = _act_sizes(wt, rows)
            sizes |= {tag + ".codes": codes, tag + ".scales": scales, tag + ".bsums": bsums}
    return sizes


def _act_kind(w: VulkanWeights) -> str:
    """Which quantized activation w's product reads (gate and up share one)."""
    if w.ggml_type not in SHADERS_Q8:
        return "f32"
    return "q8_0" if per32_activation(w.ggml_type) else "q8_k"


def _act_sizes(w: VulkanWeights, n_rows: int) -> tuple[int, int, int]:
    """Bytes of codes, scales and bsums for n_rows activations of w's cols."""
    block = 32 if per32_activation(w.ggml_type) else 256
    n_blocks = n_rows * w.cols // block
    return n_rows * w.cols, n_blocks * 4, max(n_blocks * 16 * 4, 4)


def _quantized_inputs(w: FfnWeights, n_tok: int, k: int) -> list[tuple[str, VulkanWeights, int]]:
    """(scratch tag, the weights that read it, rows) of each activation quantized for
    record_moe_ffn_q8: g for the routed gate/up and for the shared gate/up, the SwiGLU
    outputs for the routed and the shared down."""
    have = [("q_g", w.gate_exps, n_tok), ("q_mid", w.down_exps, n_tok * k)]
    if w.shared is not None:
        have += [("q_sg", w.shared[0], n_tok), ("q_smid", w.shared[2], n_tok)]
    return [(tag, wt, rows) for tag, wt, rows in have if wt.ggml_type in SHADERS_Q8]


def moe_ffn(
    w: FfnWeights, g: npt.ArrayLike, ids: npt.ArrayLike, wts: npt.ArrayLike, clamp: float
) -> F32:
    """The FFN output (n, D) for ffn-normed g (n, D) routed to ids/wts (n, k): routed
    experts plus the shared expert, one submission, fp32 numerics."""
    gs = np.ascontiguousarray(g, dtype=np.float32)
    ii = np.ascontiguousarray(ids, dtype=np.int64)
    ws = np.ascontiguousarray(wts, dtype=np.float32)
    if gs.ndim != 2 or gs.shape[1] != w.dim or ii.ndim != 2 or ii.shape[0] != gs.shape[0]:
        raise Ds4Error(f"moe: g {gs.shape}, ids {ii.shape} do not fit experts of dim {w.dim}")
    if ws.shape != ii.shape or ii.min() < 0 or ii.max() >= w.n_expert:
        raise Ds4Error(f"moe: ids must be in 0..{w.n_expert - 1} with one weight each")
    rt = w.gate_exps.rt
    n_tok, k = ii.shape
    check_pairs(n_tok * k, w.n_expert)
    host = [rt.scratch("moe.g", gs.nbytes), rt.scratch("moe.ids", ii.size * 4),
            rt.scratch("moe.wts", ws.nbytes), rt.scratch("moe.out", gs.nbytes)]  # fmt: skip
    host[0].write(gs)
    host[1].write(ii.astype(np.int32))
    host[2].write(ws)
    scratch = ffn_scratch(rt, w, n_tok, k)
    try:
        io = FfnBuffers(*host)
        rt.run(lambda rec: record_moe_ffn(rec, w, scratch, io, n_tok, clamp))
    finally:
        scratch.release()
    out: F32 = host[3].read(np.float32, gs.size).reshape(gs.shape)
    return out


def record_moe_ffn(
    rec: Recorder, w: FfnWeights, s: FfnScratch, io: FfnBuffers, n_tok: int, clamp: float
) -> None:
    """Record the whole FFN sublayer after routing (fp32 numerics): group pairs by
    expert, gate/up products, weighted clamped SwiGLU, down product, the shared expert,
    and the slot-ordered combine into io.out (n, D); barriers between dependent steps;
    s from ffn_scratch for >= n_tok tokens."""
    k, n_pairs, b = s.k, n_tok * s.k, s.bufs
    g, wts, out = io.g, io.wts, io.out
    if n_tok > s.n_tok:
        raise Ds4Error(f"moe: scratch for {s.n_tok} tokens, {n_tok} given")
    groups = ExpertGroups(b["perm"], b["chunks"], n_pairs, w.n_expert)
    record_moe_group(rec, io.ids, groups)
    sh = w.shared
    if sh is not None:
        record_matmul(rec, sh[0], g, b["sh_gate"], n_tok, w.tables["sh_gate"])
        record_matmul(rec, sh[1], g, b["sh_up"], n_tok, w.tables["sh_up"])
    rec.barrier()
    for name, dst in (("gate", b["gate"]), ("up", b["up"])):
        wt = w.gate_exps if name == "gate" else w.up_exps
        record_moe_matmul(rec, wt, groups, g, dst, k, w.tables[name])
    if sh is not None:
        record_swiglu(rec, b["sh_gate"], b["sh_up"], wts, b["sh_mid"], n_tok, sh[0].rows,
                      clamp, False)  # fmt: skip
    rec.barrier()
    record_swiglu(rec, b["gate"], b["up"], wts, b["mid"], n_pairs, w.ff, clamp, True)
    if sh is not None:
        record_matmul(rec, sh[2], b["sh_mid"], b["sh_out"], n_tok, w.tables["sh_down"])
    rec.barrier()
    record_moe_matmul(rec, w.down_exps, groups, b["mid"], b["contrib"], 1, w.tables["down"])
    rec.barrier()
    shared_out = b["sh_out"] if sh is not None else b["contrib"]
    record_moe_combine(rec, b["contrib"], shared_out, out, n_tok, k, w.dim, sh is not None)


def record_moe_ffn_q8(
    rec: Recorder, w: FfnWeights, s: FfnScratch, io: FfnBuffers, n_tok: int, clamp: float,
    quantize: Quantize,
) -> None:  # fmt: skip
    """record_moe_ffn in ds4 numerics: every quantized weight's product is the integer
    dot against its input quantized on the device by `quantize`; s from
    ffn_scratch(..., quantized=True)."""
    k, n_pairs, b = s.k, n_tok * s.k, s.bufs
    g, wts, out = io.g, io.wts, io.out
    if n_tok > s.n_tok:
        raise Ds4Error(f"moe: scratch for {s.n_tok} tokens, {n_tok} given")
    if "q_g.codes" not in b and w.gate_exps.ggml_type in SHADERS_Q8:
        raise Ds4Error("moe: ds4 numerics need ffn_scratch(..., quantized=True)")
    sh = w.shared
    pairs_sharing_codes = [(w.gate_exps, w.up_exps)] + ([(sh[0], sh[1])] if sh else [])
    if any(_act_kind(a) != _act_kind(c) for a, c in pairs_sharing_codes):
        raise Ds4Error("moe: gate and up weights need the same activation quantization")

    def acts(tag: str, y: Buffer) -> list[Buffer]:
        return [b[tag + ".codes"], b[tag + ".scales"], y, b[tag + ".bsums"]]

    def routed(wt: VulkanWeights, name: str, x: Buffer, tag: str, y: Buffer, x_div: int) -> None:
        if wt.ggml_type in SHADERS_Q8:
            record_moe_matmul_q8_grouped(rec, wt, groups, acts(tag, y), x_div, w.tables[name])
        else:
            record_moe_matmul(rec, wt, groups, x, y, x_div, w.tables[name])

    def dense(wt: VulkanWeights, name: str, x: Buffer, tag: str, y: Buffer) -> None:
        if wt.ggml_type in SHADERS_Q8:
            record_matmul_q8(rec, wt, acts(tag, y), n_tok, w.tables[name])
        else:
            record_matmul(rec, wt, x, y, n_tok, w.tables[name])

    groups = ExpertGroups(b["perm"], b["chunks"], n_pairs, w.n_expert)
    record_moe_group(rec, io.ids, groups)
    for tag, wt, rows in _quantized_inputs(w, n_tok, k):
        if tag in ("q_g", "q_sg"):
            quantize(rec, wt, g, acts(tag, b["gate"]), rows)
    rec.barrier()
    routed(w.gate_exps, "gate", g, "q_g", b["gate"], k)
    routed(w.up_exps, "up", g, "q_g", b["up"], k)
    if sh is not None:
        dense(sh[0], "sh_gate", g, "q_sg", b["sh_gate"])
        dense(sh[1], "sh_up", g, "q_sg", b["sh_up"])
    rec.barrier()
    record_swiglu(rec, b["gate"], b["up"], wts, b["mid"], n_pairs, w.ff, clamp, True)
    if sh is not None:
        record_swiglu(rec, b["sh_gate"], b["sh_up"], wts, b["sh_mid"], n_tok, sh[0].rows,
                      clamp, False)  # fmt: skip
    rec.barrier()
    for tag, wt, rows in _quantized_inputs(w, n_tok, k):
        if tag in ("q_mid", "q_smid"):
            x = b["mid"] if tag == "q_mid" else b["sh_mid"]
            quantize(rec, wt, x, acts(tag, b["contrib"]), rows)
    rec.barrier()
    routed(w.down_exps, "down", b["mid"], "q_mid", b["contrib"], 1)
    if sh is not None:
        dense(sh[2], "sh_down", b["sh_mid"], "q_smid", b["sh_out"])
    rec.barrier()
    shared_out = b["sh_out"] if sh is not None else b["contrib"]
    record_moe_combine(rec, b["contrib"], shared_out, out, n_tok, k, w.dim, sh is not None)


def record_moe_group(rec: Recorder, ids: Buffer, groups: ExpertGroups) -> None:
    """Record the grouping of ids (groups.n_pairs int32) into groups.perm and its chunk
    table."""
    n_pairs, n_expert = groups.n_pairs, groups.n_expert
    check_pairs(n_pairs, n_expert)
    push = struct.pack("<3I", n_pairs, n_expert, TOKENS_PER_GROUP)
    rec.dispatch("moe_group", [ids, groups.perm, groups.chunks], push, (1, 1, 1))


def record_moe_matmul(
    rec: Recorder, w: VulkanWeights, groups: ExpertGroups, x: Buffer, y: Buffer, x_div: int,
    tables: list[Buffer],
) -> None:  # fmt: skip
    """Record y[q] = W_{expert(q)} x[q // x_div] for the pairs grouped by
    record_moe_group (x_div = k: one activation row per token; 1: one per pair); y is
    (n_pairs, rows_per_expert); tables from kernel_tables(w)."""
    n_pairs, n_expert, perm, chunks = groups.n_pairs, groups.n_expert, groups.perm, groups.chunks
    per = _per_expert(w, n_expert)
    check_pairs(n_pairs, n_expert)
    push = struct.pack("<6I", per, w.cols, n_pairs, w.row_bytes, w.offset, x_div)
    gx = min(per, MAX_GROUPS)
    dims = (gx, -(-per // gx), max_chunks(n_pairs, n_expert))
    shader = _shader_name(w) + "_moe"
    rec.dispatch(shader, [w.buffer, x, y, tables[0] if tables else x, perm, chunks], push,
                 dims)  # fmt: skip


def record_moe_matmul_q8(
    rec: Recorder, w: VulkanWeights, n_expert: int, acts: list[Buffer], ids: Buffer,
    n_pairs: int, x_div: int, tables: list[Buffer],
) -> None:  # fmt: skip
    """ds4 numerics: y[q] = W_{ids[q]} . codes[q // x_div] with acts = [codes, scales, y,
    bsums] as weights.stage_activations lays them out (y: n_pairs rows of
    rows_per_expert)."""
    if w.ggml_type not in SHADERS_Q8:
        raise Ds4Error(f"no quantized-activation Vulkan kernel for {w.ggml_type.name} weights")
    per = _per_expert(w, n_expert)
    if not 1 <= n_pairs <= MAX_GROUPS:
        raise Ds4Error(f"moe: {n_pairs} pairs outside 1..{MAX_GROUPS}")
    push = struct.pack("<6I", per, w.cols, n_pairs, w.row_bytes, w.offset, x_div)
    gx = min(per, MAX_GROUPS)
    bufs = [w.buffer, *acts, tables[0] if tables else acts[0], ids]
    rec.dispatch(SHADERS_Q8[w.ggml_type] + "_moe", bufs, push, (gx, -(-per // gx), n_pairs))


def record_moe_matmul_q8_grouped(
    rec: Recorder, w: VulkanWeights, groups: ExpertGroups, acts: list[Buffer], x_div: int,
    tables: list[Buffer],
) -> None:  # fmt: skip
    """record_moe_matmul_q8 over the pairs grouped by record_moe_group: a workgroup takes
    up to 8 pairs of one expert, so a weight row is fetched once per chunk rather than
    once per pair (prefill); bit-identical results."""
    n_pairs, n_expert, perm, chunks = groups.n_pairs, groups.n_expert, groups.perm, groups.chunks
    if w.ggml_type not in SHADERS_Q8:
        raise Ds4Error(f"no quantized-activation Vulkan kernel for {w.ggml_type.name} weights")
    per = _per_expert(w, n_expert)
    check_pairs(n_pairs, n_expert)
    push = struct.pack("<6I", per, w.cols, n_pairs, w.row_bytes, w.offset, x_div)
    gx = min(per, MAX_GROUPS)
    bufs = [w.buffer, *acts, tables[0] if tables else acts[0], perm, chunks]
    dims = (gx, -(-per // gx), max_chunks(n_pairs, n_expert))
    rec.dispatch(SHADERS_Q8[w.ggml_type] + "_moe_grouped", bufs, push, dims)


def moe_matmul_q8(
    w: VulkanWeights, n_expert: int, x: npt.ArrayLike, ids: npt.ArrayLike, x_div: int, *,
    grouped: bool = False,
) -> F32:  # fmt: skip
    """Host form of record_moe_matmul_q8 (grouped: record_moe_group then
    record_moe_matmul_q8_grouped): x (n_rows, cols) quantized on the host, ids (n_pairs,)
    with n_pairs = n_rows * x_div -> (n_pairs, rows_per_expert)."""
    xs = np.ascontiguousarray(x, dtype=np.float32)
    ii = np.ascontiguousarray(ids, dtype=np.int32).reshape(-1)
    per = _per_expert(w, n_expert)
    if xs.ndim != 2 or ii.size != xs.shape[0] * x_div or ii.min() < 0 or ii.max() >= n_expert:
        raise Ds4Error(f"moe: x {xs.shape}, {ii.size} ids do not fit x_div {x_div}")
    rt = w.rt
    acts = stage_activations(w.view(0, per), xs)
    y = rt.scratch("moeq8.y", ii.size * per * 4)
    idb = rt.scratch("moeq8.ids", ii.nbytes)
    idb.write(ii)
    tables = kernel_tables(rt, w)
    bufs = [acts[0], acts[1], y, acts[3]]
    perm = rt.device_buffer(ii.nbytes)
    chunks = rt.device_buffer(chunk_table_bytes(ii.size, n_expert))

    def record(rec: Recorder) -> None:
        if not grouped:
            record_moe_matmul_q8(rec, w, n_expert, bufs, idb, ii.size, x_div, tables)
            return
        groups = ExpertGroups(perm, chunks, ii.size, n_expert)
        record_moe_group(rec, idb, groups)
        rec.barrier()
        record_moe_matmul_q8_grouped(rec, w, groups, bufs, x_div, tables)

    try:
        rt.run(record)
    finally:
        perm.release()
        chunks.release()
    out: F32 = y.read(np.float32, ii.size * per).reshape(ii.size, per)
    return out


def record_swiglu(
    rec: Recorder, gate: Buffer, up: Buffer, wts: Buffer, out: Buffer, n_rows: int, dim: int,
    limit: float, weighted: bool,
) -> None:  # fmt: skip
    """Record out = silu(min(gate, c)) * clip(up, -c, c) [* wts[row]] over (n_rows, dim)."""
    push = struct.pack("<IIfI", n_rows, dim, limit, int(weighted))
    _elementwise(rec, "swiglu", [gate, up, wts, out], push, n_rows * dim)


def record_moe_combine(
    rec: Recorder, contrib: Buffer, shared: Buffer, out: Buffer, n_tok: int, k: int, dim: int,
    has_shared: bool,
) -> None:  # fmt: skip
    """Record out[t] = sum over slots of contrib[t, s] (in slot order) [+ shared[t]]."""
    push = struct.pack("<4I", n_tok, k, dim, int(has_shared))
    _elementwise(rec, "moe_combine", [contrib, shared, out], push, n_tok * dim)


def check_pairs(n_pairs: int, n_expert: int) -> None:
    if (
        not 1 <= n_expert <= MAX_EXPERT
        or n_pairs < 1
        or max_chunks(n_pairs, n_expert) > (MAX_GROUPS)
    ):
        raise Ds4Error(f"moe: {n_pairs} pairs over {n_expert} experts out of range")


def _per_expert(w: VulkanWeights, n_expert: int) -> int:
    if n_expert < 1 or w.rows % n_expert:
        raise Ds4Error(f"moe: {w.rows} rows do not split into {n_expert} experts")
    return w.rows // n_expert


def _shader_name(w: VulkanWeights) -> str:
    return SHADERS[w.ggml_type]


def _elementwise(rec: Recorder, shader: str, bufs: list[Buffer], push: bytes, n: int) -> None:
    groups = -(-n // WG)
    gx = min(groups, MAX_GROUPS)
    rec.dispatch(shader, bufs, push, (gx, -(-groups // gx), 1))
