"""The token embedding on the GPU (native/vulkan/embed_rows.comp): each token's row of the
resident F16/F32 token_embd, widened to f32 (exact) into all n_hc streams."""

from __future__ import annotations

import struct

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.matvec import VulkanWeights
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS, Recorder
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType

WG = 64
EMBED_TYPES = (GGMLType.F16, GGMLType.F32)


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
                       int(table.ggml_type is GGMLType.F16))  # fmt: skip
    rec.dispatch("embed_rows", [table.buffer, ids, out], push, (gx, -(-groups // gx), 1))
