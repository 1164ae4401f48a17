"""Attention with sinks for a chunk of queries on the device == the reference's
attend_with_sinks over the rows attention_sublayer gives each query (raw window, then the
compressed rows or the indexer's selection): |out - ref| <= 1e-4 * max|rows|."""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt
import pytest

from ds4.adapters.compute.vulkan.attention import AttentionWindow, attend_chunk
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.domain.engine_math.layers import attend_with_sinks, top_k_mask
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
U32 = npt.NDArray[np.uint32]


def _reference(q: F32, raw: F32, comp: F32, sinks: F32, scale: float, win: AttentionWindow,
               sel: U32 | None) -> F32:  # fmt: skip
    out = np.empty_like(q)
    for t in range(q.shape[0]):
        p = win.pos0 + t
        rows = raw[win.first_raw(t) - win.raw_base : p + 1 - win.raw_base]
        n = win.visible(t)
        if n:
            listed = win.top_k and n > win.top_k
            chosen = comp[sel[t].astype(np.int64)] if listed and sel is not None else comp[:n]
            rows = np.concatenate([rows, chosen])
        out[t] = attend_with_sinks(q[t], rows, sinks, scale)
    return out


def _case(win: AttentionWindow, n_q: int, n_head: int, dim: int, seed: int
          ) -> tuple[F32, F32, F32, F32, U32 | None]:  # fmt: skip
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_q, n_head, dim)).astype(np.float32)
    raw = (rng.standard_normal((win.pos0 + n_q - win.raw_base, dim)) * 2).astype(np.float32)
    comp = rng.standard_normal((max(win.visible(n_q - 1), 1), dim)).astype(np.float32)
    sinks = rng.standard_normal(n_head).astype(np.float32)
    sel = None
    if win.top_k:
        scores = rng.standard_normal((n_q, comp.shape[0])).astype(np.float32)
        sel = np.zeros((n_q, win.top_k), np.uint32)
        for t in range(n_q):
            n = win.visible(t)
            if n > win.top_k:
                sel[t] = top_k_mask(scores[t, :n], win.top_k)
    return q, raw, comp, sinks, sel


CASES = {
    "dense-sliding": (AttentionWindow(pos0=0, n_swa=4), 7, 3, 16),
    "dense-decode-long-window": (AttentionWindow(pos0=300, n_swa=128), 1, 2, 64),
    "ratio128-prefill": (AttentionWindow(pos0=250, n_swa=128, ratio=128), 10, 4, 96),
    "ratio4-all-rows": (AttentionWindow(pos0=5, n_swa=8, ratio=4), 9, 2, 32),
    "ratio4-selected": (AttentionWindow(pos0=20, n_swa=8, ratio=4, top_k=3), 6, 2, 32),
    "trimmed-raw-buffer": (AttentionWindow(pos0=40, n_swa=16, raw_base=30, floor_pos=33), 5, 2, 8),
    "flash-decode": (AttentionWindow(pos0=2100, n_swa=128, ratio=4, top_k=512), 1, 64, 512),
    "odd-dim": (AttentionWindow(pos0=3, n_swa=128, ratio=4), 3, 5, 130),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_chunk_attention_agrees_with_the_reference(vk: VulkanRuntime, name: str) -> None:
    win, n_q, n_head, dim = CASES[name]
    q, raw, comp, sinks, sel = _case(win, n_q, n_head, dim, seed=len(name))
    scale = 1.0 / np.sqrt(dim)
    got = attend_chunk(q, raw, comp if win.ratio else None, sinks, scale, win, sel, rt=vk)
    ref = _reference(q, raw, comp, sinks, scale, win, sel)
    bound = 1e-4 * max(float(np.max(np.abs(raw))), float(np.max(np.abs(comp))))
    assert np.all(np.abs(got - ref) <= bound), float(np.max(np.abs(got - ref)) / bound)


def test_raw_rows_in_a_ring(vk: VulkanRuntime) -> None:
    # A ring of n_swa + n_q - 1 rows holds exactly what a chunk reads; position x sits at
    # (x - raw_base) % ring, so the chunk's rows wrap around the buffer's end.
    lin = AttentionWindow(pos0=45, n_swa=16, ratio=4, raw_base=0)
    n_q, ring = 5, 20
    q, raw, comp, sinks, _ = _case(lin, n_q, 3, 32, seed=9)
    ring_rows = np.zeros((ring, 32), np.float32)
    positions = np.arange(lin.first_raw(0), lin.pos0 + n_q)
    ring_rows[positions % ring] = raw[positions]
    win = dataclasses.replace(lin, raw_ring=ring)
    got = attend_chunk(q, ring_rows, comp, sinks, 0.25, win, rt=vk)
    ref = _reference(q, raw, comp, sinks, 0.25, lin, None)
    assert np.all(np.abs(got - ref) <= 1e-4 * np.max(np.abs(raw)))
    with pytest.raises(Ds4Error, match="does not hold"):
        attend_chunk(q, ring_rows, comp, sinks, 0.25, dataclasses.replace(lin, raw_ring=19), rt=vk)


def test_windows_outside_the_buffers_are_refused(vk: VulkanRuntime) -> None:
    win = AttentionWindow(pos0=40, n_swa=16, raw_base=30)  # needs position 25
    q, raw, comp, sinks, _ = _case(AttentionWindow(pos0=40, n_swa=16, raw_base=30), 2, 1, 8, 1)
    with pytest.raises(Ds4Error, match="do not cover"):
        attend_chunk(q, raw, None, sinks, 0.5, win, rt=vk)
    with pytest.raises(Ds4Error, match="compressed rows visible"):
        attend_chunk(q, raw, comp[:0], sinks, 0.5,
                     AttentionWindow(pos0=40, n_swa=4, raw_base=30, ratio=4), rt=vk)  # fmt: skip
