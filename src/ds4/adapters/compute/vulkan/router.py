"""MoE routing on the GPU (native/vulkan/router.comp; docs/vulkan.md#kernels): the gate
logits product, sqrt(softplus) scores, bias-steered top-k with the reference's tie rule
(lower expert id first) or hash routing from the tid2eid table, and the renormalised,
scaled weights, as domain/engine_math/layers.py's route() forms them.

Output per token: k expert ids (int32) and k weights (f32), left in device buffers for
the expert kernels (moe.py).
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.matvec import VulkanWeights, record_matmul
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS, Recorder
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
MAX_EXPERT = 1024  # MAX_EXPERT in router.comp
MAX_K = 32
TOP_K, TOP_K_BIAS, HASH = 0, 1, 2  # router.comp modes


def route_on_device(
    logits: npt.ArrayLike, k: int, scale: float, normalize: bool, rt: VulkanRuntime, *,
    bias: npt.ArrayLike | None = None, tokens: npt.ArrayLike | None = None,
    tid2eid: npt.ArrayLike | None = None,
) -> tuple[I64, F32]:  # fmt: skip
    """ids, weights (n, k) each for logits (n, E): top-k (bias steering the choice when
    given), or hash routing when tokens and the (vocab, k) tid2eid table are given."""
    lg = np.ascontiguousarray(logits, dtype=np.float32)
    if lg.ndim != 2 or lg.shape[0] < 1:
        raise Ds4Error(f"route: logits {lg.shape} must be (n_tok, n_expert)")
    n_tok, n_expert = lg.shape
    hashed = tokens is not None or tid2eid is not None
    if hashed and (tokens is None or tid2eid is None or bias is not None):
        raise Ds4Error("route: hash routing takes both tokens and tid2eid, and no bias")
    mode = HASH if hashed else TOP_K if bias is None else TOP_K_BIAS
    check_route(n_tok, n_expert, k, mode)
    arrays: list[npt.NDArray[np.generic]] = [lg]
    if bias is not None:
        b = np.ascontiguousarray(bias, dtype=np.float32)
        if b.shape != (n_expert,):
            raise Ds4Error(f"route: bias {b.shape} does not fit {n_expert} experts")
        arrays.append(b)
    if hashed:
        tok = np.ascontiguousarray(tokens, dtype=np.int64).reshape(-1)
        table = hash_table(np.asarray(tid2eid), n_expert, k)
        if tok.shape != (n_tok,) or tok.min() < 0 or tok.max() >= table.shape[0]:
            raise Ds4Error(f"route: token ids must be {n_tok} values in 0..{table.shape[0] - 1}")
        arrays += [tok.astype(np.int32), table]
    bufs = [rt.scratch(f"route.in{i}", a.nbytes) for i, a in enumerate(arrays)]
    for buf, a in zip(bufs, arrays, strict=True):
        buf.write(a)
    ids, wts = rt.scratch("route.ids", n_tok * k * 4), rt.scratch("route.wts", n_tok * k * 4)
    lb = bufs[0]
    bb = bufs[1] if mode == TOP_K_BIAS else lb
    tb, hb = (bufs[1], bufs[2]) if mode == HASH else (lb, lb)
    rt.run(lambda rec: record_route(rec, lb, bb, tb, hb, ids, wts, n_tok, n_expert, k, mode,
                                    scale, normalize))  # fmt: skip
    out_ids: I64 = ids.read(np.int32, n_tok * k).reshape(n_tok, k).astype(np.int64)
    out_wts: F32 = wts.read(np.float32, n_tok * k).reshape(n_tok, k)
    return out_ids, out_wts


def hash_table(tid2eid: npt.NDArray[np.generic], n_expert: int, k: int) -> npt.NDArray[np.int32]:
    """The (vocab, k) int32 table as the router reads it, every id checked in range
    (the shader trusts it: a wrong id would address outside the expert tensor)."""
    raw = np.ascontiguousarray(tid2eid)
    table: npt.NDArray[np.int32] = np.ascontiguousarray(
        raw.view("<i4") if raw.dtype == np.uint8 else raw, dtype=np.int32
    )
    if table.ndim != 2 or table.shape[1] != k or table.size == 0:
        raise Ds4Error(f"tid2eid table {table.shape} is not (vocab, {k})")
    if table.min() < 0 or table.max() >= n_expert:
        raise Ds4Error(f"tid2eid table holds expert ids outside 0..{n_expert - 1}")
    return table


def record_router(
    rec: Recorder, gate_inp: VulkanWeights, tables: list[Buffer], g: Buffer, logits: Buffer,
    bias: Buffer, tokens: Buffer, tid2eid: Buffer, ids: Buffer, wts: Buffer, n_tok: int,
    k: int, mode: int, scale: float, normalize: bool,
) -> None:  # fmt: skip
    """Record the gate product logits = gate_inp g (fp32 dots), a barrier, and the
    routing; unused inputs (bias outside TOP_K_BIAS, tokens/tid2eid outside HASH) may be
    any buffer."""
    record_matmul(rec, gate_inp, g, logits, n_tok, tables)
    rec.barrier()
    record_route(rec, logits, bias, tokens, tid2eid, ids, wts, n_tok, gate_inp.rows, k, mode,
                 scale, normalize)  # fmt: skip


def record_route(
    rec: Recorder, logits: Buffer, bias: Buffer, tokens: Buffer, tid2eid: Buffer, ids: Buffer,
    wts: Buffer, n_tok: int, n_expert: int, k: int, mode: int, scale: float, normalize: bool,
) -> None:  # fmt: skip
    """Record the routing of logits (n, E) into ids (n, k) int32 and wts (n, k) f32;
    tokens (n,) int32 and tid2eid (from hash_table) are read in HASH mode only."""
    check_route(n_tok, n_expert, k, mode)
    n_vocab = max(tid2eid.size // (4 * k), 1)  # rows of the table (HASH mode)
    push = struct.pack("<4IfII", n_tok, n_expert, k, mode, scale, int(normalize), n_vocab)
    gx = min(n_tok, MAX_GROUPS)
    rec.dispatch("router", [logits, bias, tokens, tid2eid, ids, wts], push,
                 (gx, -(-n_tok // gx), 1))  # fmt: skip


def check_route(n_tok: int, n_expert: int, k: int, mode: int) -> None:
    if not 1 <= n_expert <= MAX_EXPERT or not 1 <= k <= min(MAX_K, n_expert) or n_tok < 1:
        raise Ds4Error(f"route: {n_expert} experts, top {k} (experts 1..{MAX_EXPERT}, "
                       f"k 1..{MAX_K} and at most the experts)")  # fmt: skip
    if mode not in (TOP_K, TOP_K_BIAS, HASH):
        raise Ds4Error(f"route: unknown mode {mode}")
