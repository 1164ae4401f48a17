"""embed_rows.comp: a chunk's embedding rows from resident F16/BF16/F32 blocks, in every HC
stream, bit-identical to the host's widening (f16 subnormals, infinities included)."""

from __future__ import annotations

import numpy as np
import pytest

from ds4.adapters.compute.vulkan.hc import record_embed
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.adapters.compute.vulkan.weights import upload_weights
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType


@pytest.mark.parametrize("kind", [GGMLType.F16, GGMLType.F32, GGMLType.BF16])
def test_rows_land_in_every_stream(vk: VulkanRuntime, kind: GGMLType) -> None:
    rng = np.random.default_rng(1)
    vocab, dim, n_hc = 50, 64, 3
    dtype = np.float16 if kind is GGMLType.F16 else np.float32
    table = (rng.standard_normal((vocab, dim)) * 100).astype(dtype)
    table[3, :4] = np.array([6e-8, -np.inf, np.inf, -3e-5], dtype=np.float16)  # edge values
    stored = table.view(np.uint8).reshape(vocab, -1)
    if kind is GGMLType.BF16:  # the top halves of the f32 words, which are then exact
        table = (table.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
        stored = (table.view(np.uint32) >> 16).astype("<u2").view(np.uint8).reshape(vocab, -1)
    table_dev = upload_weights(stored, kind, dim, rt=vk)
    ids = np.array([3, 0, 49, 3, 17], dtype=np.uint32)
    ib, out = vk.host_buffer(ids.nbytes), vk.host_buffer(ids.size * n_hc * dim * 4)
    ib.write(ids)
    vk.run(lambda rec: record_embed(rec, table_dev, ib, out, ids.size, n_hc))
    got = out.read(np.float32, ids.size * n_hc * dim).reshape(ids.size, n_hc, dim)
    want = np.repeat(table[ids].astype(np.float32)[:, None, :], n_hc, axis=1)
    assert np.array_equal(got, want)
    for b in (ib, out, table_dev.buffer):
        b.release()


def test_quantized_tables_are_refused(vk: VulkanRuntime) -> None:
    raw = np.zeros((2, 34), np.uint8)  # one Q8_0 block per row
    table = upload_weights(raw, GGMLType.Q8_0, 32, rt=vk)
    with pytest.raises(Ds4Error, match="no Vulkan gather"):
        vk.run(lambda rec: record_embed(rec, table, table.buffer, table.buffer, 1, 1))
    table.release()
