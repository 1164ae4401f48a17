"""The grouped output projection of attention on the GPU (docs/vulkan.md#kernels):
low[t, g] = wo_a[g] . heads[t, g] for each of the G groups (wo_a's rows in G slabs of
o_lora_rank, each over its group's group_in_dim inputs), then out = wo_b . low.

The groups run as the expert-indexed kernels run experts: the flat heads (n, G * gin)
are (n * G, gin) rows, row q is group q % G's input, and wo_a's slabs are its "experts";
so the low-rank products of all groups are one dispatch that decodes each wo_a row once
per chunk of 8 tokens.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.matvec import VulkanWeights, kernel_tables, record_matmul
from ds4.adapters.compute.vulkan.moe import (
    check_pairs,
    chunk_table_bytes,
    record_moe_group,
    record_moe_matmul,
)
from ds4.adapters.compute.vulkan.submission import Recorder
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]


def group_ids(n_tok: int, n_groups: int) -> npt.NDArray[np.int32]:
    """The group of each (token, group) row: 0..G-1 per token (upload once for the
    largest chunk: a shorter one reads a prefix)."""
    out: npt.NDArray[np.int32] = np.tile(np.arange(n_groups, dtype=np.int32), n_tok)
    return out


def grouped_output(wo_a: VulkanWeights, wo_b: VulkanWeights, heads: npt.ArrayLike,
                   n_groups: int) -> F32:  # fmt: skip
    """out (n, D) for flat attention heads (n, G * gin), fp32 numerics, one submission."""
    xs = np.ascontiguousarray(heads, dtype=np.float32)
    check_grouped(wo_a, wo_b, n_groups)
    if xs.ndim != 2 or xs.shape[1] != n_groups * wo_a.cols or xs.shape[0] < 1:
        raise Ds4Error(f"grouped output: heads {xs.shape} are not (n, {n_groups * wo_a.cols})")
    rt = wo_a.rt
    n_tok = xs.shape[0]
    n_rows = n_tok * n_groups
    ids = group_ids(n_tok, n_groups)
    bufs = {"x": rt.scratch("go.x", xs.nbytes), "ids": rt.scratch("go.ids", ids.nbytes),
            "out": rt.scratch("go.out", n_tok * wo_b.rows * 4)}  # fmt: skip
    bufs["x"].write(xs)
    bufs["ids"].write(ids)
    dev = {"perm": rt.device_buffer(n_rows * 4),
           "chunks": rt.device_buffer(chunk_table_bytes(n_rows, n_groups)),
           "low": rt.device_buffer(n_tok * wo_a.rows * 4)}  # fmt: skip
    tables = (kernel_tables(rt, wo_a), kernel_tables(rt, wo_b))
    try:
        rt.run(lambda rec: record_grouped_output(
            rec, wo_a, wo_b, tables, bufs["x"], bufs["ids"], dev["perm"], dev["chunks"],
            dev["low"], bufs["out"], n_tok, n_groups))  # fmt: skip
    finally:
        for buf in dev.values():
            buf.release()
    out: F32 = bufs["out"].read(np.float32, n_tok * wo_b.rows).reshape(n_tok, wo_b.rows)
    return out


def record_grouped_output(
    rec: Recorder, wo_a: VulkanWeights, wo_b: VulkanWeights,
    tables: tuple[list[Buffer], list[Buffer]], heads: Buffer, ids: Buffer, perm: Buffer,
    chunks: Buffer, low: Buffer, out: Buffer, n_tok: int, n_groups: int,
) -> None:  # fmt: skip
    """Record out (n, D) = wo_b . [wo_a[g] . heads[:, g]]_g with barriers between: ids
    from group_ids (>= n_tok tokens), perm (n * G u32) and chunks (chunk_table_bytes(n * G,
    G)) and low (n, G * o_lora_rank) scratch; tables = kernel_tables of wo_a and wo_b."""
    check_grouped(wo_a, wo_b, n_groups)
    n_rows = n_tok * n_groups
    check_pairs(n_rows, n_groups)
    record_moe_group(rec, ids, perm, chunks, n_rows, n_groups)
    rec.barrier()
    record_moe_matmul(rec, wo_a, n_groups, heads, low, perm, chunks, n_rows, 1, tables[0])
    rec.barrier()
    record_matmul(rec, wo_b, low, out, n_tok, tables[1])


def check_grouped(wo_a: VulkanWeights, wo_b: VulkanWeights, n_groups: int) -> None:
    if n_groups < 1 or wo_a.rows % n_groups or wo_b.cols != wo_a.rows:
        raise Ds4Error(f"grouped output: wo_a {wo_a.rows}x{wo_a.cols} in {n_groups} groups "
                       f"does not feed wo_b {wo_b.rows}x{wo_b.cols}")  # fmt: skip
