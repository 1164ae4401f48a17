"""The reference engine's per-layer state to and from the shared DSV4 snapshot
(domain/engine/dsv4_payload.py does the bytes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.kv_state import CompressorHistory, LayerState
from ds4.domain.engine.dsv4_payload import (
    CompressorSnapshot,
    LayerSnapshot,
    SessionSnapshot,
    raw_window,
)
from ds4.domain.model.hparams import DeepSeekV4HParams

F32 = npt.NDArray[np.float32]


def _comp_snapshot(comp: CompressorHistory | None, t: int) -> CompressorSnapshot | None:
    if comp is None:
        return None
    s_kv, s_sc = comp.frontier(t)
    return CompressorSnapshot(comp.rows.view().copy(), s_kv, s_sc)


def snapshot_of(
    hp: DeepSeekV4HParams, ctx: int, tokens: Sequence[int], logits: F32, states: list[LayerState]
) -> SessionSnapshot:
    t = len(tokens)
    r = min(t, raw_window(hp, ctx))
    layers = [
        LayerSnapshot(s.raw.span(t - r, t).copy(), _comp_snapshot(s.attn, t),
                      _comp_snapshot(s.index, t))
        for s in states
    ]  # fmt: skip
    return SessionSnapshot(list(tokens), logits, layers)


def restore_states(hp: DeepSeekV4HParams, snap: SessionSnapshot) -> list[LayerState]:
    """Fresh LayerStates holding what the snapshot describes."""
    t = len(snap.tokens)
    states = [LayerState(hp, il) for il in range(hp.n_layer)]
    for s, lay in zip(states, snap.layers, strict=True):
        s.raw.set_rows(t - lay.raw.shape[0], lay.raw)
        for comp, part in ((s.attn, lay.attn), (s.index, lay.index)):
            if comp is not None and part is not None:
                comp.rows.set_rows(0, part.rows)
                comp.restore_frontier(t, part.frontier_kv, part.frontier_score)
    return states
