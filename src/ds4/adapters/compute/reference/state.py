"""One sequence's state on the reference backend: per-layer KV and compressor history,
its DSV4 snapshot, and ReferenceState (the SequenceState port).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.compressor_frontier import (
    frontier_from_inputs,
    frontier_start,
    inputs_from_frontier,
    lanes,
)
from ds4.domain.engine.dsv4_payload import (
    CompressorSnapshot,
    LayerSnapshot,
    SessionSnapshot,
    raw_window,
)
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import SequenceState

# --- Per-layer KV state ---------------------------------------------------------------
# Per-layer state of one sequence (docs/reference/model.md §5.1), kept per token so
# rewinds are cheap.
#
# Beyond what ds4 keeps, recent raw KV rows and each recent token's compressor inputs
# (kv projection and score = gate + ape) are retained, so a rewind within that history
# is exact and cheap; the compressor frontier of docs/reference/model.md §5.3 is a view
# of the last window(s) of those inputs. Older history is trimmed (each array's `base`);
# a restored payload starts with only the last window of raw rows and the frontier.
# Rewinds below what is kept need a recompute (the session's rewind floor says so).

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


class GrowRows:
    """Append-only (n, width) f32 rows indexed by absolute position, with amortised
    doubling, truncation and trimming: rows before `base` may be dropped, so a long
    sequence keeps only the recent history it still needs."""

    def __init__(self, width: int) -> None:
        self._data = np.zeros((16, width), dtype=np.float32)
        self.base = 0  # absolute index of _data[0]
        self.n = 0  # absolute end

    def _reserve(self, n: int) -> None:
        need = n - self.base
        if need > self._data.shape[0]:
            grown = np.zeros((max(need, 2 * self._data.shape[0]), self._data.shape[1]), np.float32)
            grown[: self.n - self.base] = self._data[: self.n - self.base]
            self._data = grown

    def reserve(self, n: int) -> F32:
        """Room up to absolute row n; the whole backing array (row p at p - base, rows past
        `n` are scratch), for a native writer that then sets `n`."""
        self._reserve(n)
        return self._data

    def append(self, row: F32) -> None:
        self._reserve(self.n + 1)
        self._data[self.n - self.base] = row
        self.n += 1

    def set_rows(self, start: int, rows: F32) -> None:
        """Write rows at [start, start+len) and make that the end (zeros fill any gap).
        An empty array starts at `start` (a restored window needs nothing before it)."""
        if self.n == self.base:
            self.base = self.n = start
        if start < self.base:
            raise ValueError(f"row {start} is before the kept history ({self.base})")
        end = start + rows.shape[0]
        self._reserve(end)
        self._data[self.n - self.base : start - self.base] = 0
        self._data[start - self.base : end - self.base] = rows
        self.n = end

    def truncate(self, n: int) -> None:
        self.n = max(self.base, min(self.n, n))

    def trim(self, keep_from: int) -> bool:
        """Forget rows before keep_from (moved only once enough piled up: amortised);
        whether anything moved."""
        keep_from = min(keep_from, self.n)
        drop = keep_from - self.base
        if drop <= 0 or drop < self._data.shape[0] // 2:
            return False
        kept = self.n - keep_from
        self._data[:kept] = self._data[drop : drop + kept].copy()
        self.base = keep_from
        return True

    def span(self, start: int, end: int) -> F32:
        """Rows [start, end) by absolute position (start must be kept)."""
        if start < self.base or end > self.n:
            raise ValueError(f"rows {start}..{end} are outside the kept {self.base}..{self.n}")
        return self._data[start - self.base : end - self.base]

    def view(self) -> F32:
        """Every kept row, from `base`."""
        return self._data[: self.n - self.base]


class CompressorHistory:
    """Per-token compressor inputs (kv, score) and the emitted rows of one compressor."""

    def __init__(self, ratio: int, row_width: int) -> None:
        self.ratio = ratio
        self.row_width = row_width
        self.width = lanes(ratio) * row_width
        self.kv = GrowRows(self.width)
        self.score = GrowRows(self.width)
        self.rows = GrowRows(row_width)

    def truncate(self, n_tokens: int) -> None:
        self.kv.truncate(n_tokens)
        self.score.truncate(n_tokens)
        self.rows.truncate(n_tokens // self.ratio)

    def frontier_start(self, n_tokens: int) -> int:
        """First token whose inputs the frontier after n_tokens holds
        (docs/reference/model.md §5.3)."""
        return frontier_start(self.ratio, n_tokens)

    def frontier(self, n_tokens: int) -> tuple[F32, F32]:
        """The canonical (S_kv, S_sc) after n_tokens, unused slots cleared (kv 0, -1e30)."""
        return frontier_from_inputs(self.ratio, self.width, n_tokens, self.kv.span, self.score.span)

    def restore_frontier(self, n_tokens: int, s_kv: F32, s_sc: F32) -> None:
        """Rebuild the per-token inputs the frontier holds (earlier tokens stay zero)."""
        start, kv, sc = inputs_from_frontier(self.ratio, n_tokens, s_kv, s_sc)
        self.kv.set_rows(start, kv)
        self.score.set_rows(start, sc)


class LayerState:
    def __init__(self, hp: DeepSeekV4HParams, layer: int | None) -> None:
        """layer None: a window-only state (ratio 0, no compressor: the MTP block)."""
        self.ratio = hp.compress_ratios[layer] if layer is not None else 0
        self.n_swa = hp.n_swa
        self.version = 0  # bumped by every change made outside a forward pass
        self.raw = GrowRows(hp.head_dim)  # row p = position p (f16-rounded with ds4 numerics)
        self.attn = CompressorHistory(self.ratio, hp.head_dim) if self.ratio else None
        self.index = CompressorHistory(4, hp.indexer_head_dim) if self.ratio == 4 else None

    def truncate(self, n_tokens: int) -> None:
        self.version += 1
        self.raw.truncate(n_tokens)
        for comp in (self.attn, self.index):
            if comp is not None:
                comp.truncate(n_tokens)

    def trim(self, keep_from: int) -> None:
        """Forget per-token history before keep_from, never what the raw window or a
        compressor frontier after `raw.n` tokens still reads."""
        n = self.raw.n
        moved = self.raw.trim(min(keep_from, n - min(n, self.n_swa)))
        for comp in self.compressors():
            moved |= comp.kv.trim(min(keep_from, comp.frontier_start(n)))
            moved |= comp.score.trim(min(keep_from, comp.frontier_start(n)))
        if moved:
            self.version += 1

    def compressors(self) -> list[CompressorHistory]:
        return [c for c in (self.attn, self.index) if c is not None]


# --- Snapshots ------------------------------------------------------------------------
# The reference engine's per-layer state to and from the shared DSV4 snapshot
# (domain/engine/dsv4_payload.py does the bytes).


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


# --- The SequenceState port -----------------------------------------------------------
# ReferenceState: the SequenceState port on numpy LayerStates and the numpy forward.


class ChunkForward(Protocol):
    """What a session needs of a forward pass (numpy here, native in the CPU backend)."""

    hp: DeepSeekV4HParams

    def run(self, tokens: I64, positions: I64, states: list[LayerState]) -> F32: ...

    def head(self, streams: F32) -> F32: ...


class ReferenceState:
    def __init__(self, forward: ChunkForward, ctx: int) -> None:
        self._fwd = forward
        self._hp: DeepSeekV4HParams = forward.hp
        self._ctx = ctx
        self.layers = [LayerState(self._hp, il) for il in range(self._hp.n_layer)]

    @property
    def length(self) -> int:
        return self.layers[0].raw.n

    def forward(self, tokens: npt.NDArray[np.int64], all_logits: bool) -> F32:
        return self.forward_streams(tokens, all_logits, 0)[0]

    def forward_streams(
        self, tokens: npt.NDArray[np.int64], all_logits: bool, keep: int
    ) -> tuple[F32, F32]:
        start = self.length
        positions = np.arange(start, start + tokens.size, dtype=np.int64)
        try:
            streams = self._fwd.run(tokens, positions, self.layers)
            logits = self._fwd.head(streams if all_logits else streams[-1:])
        except BaseException:
            self.truncate(start)  # leave the state as it was before this chunk
            raise
        return logits, streams[streams.shape[0] - min(keep, streams.shape[0]) :]

    def truncate(self, n: int) -> None:
        for s in self.layers:
            s.truncate(n)

    def trim(self, keep_from: int) -> None:
        for s in self.layers:
            s.trim(keep_from)

    def history_ok(self, m: int) -> bool:
        for s in self.layers:
            if max(0, m + 1 - self._hp.n_swa) < s.raw.base:
                return False
            for comp in s.compressors():
                need = comp.frontier_start(m)
                if need < m and need < comp.kv.base:
                    return False
        return True

    def snapshot(self, tokens: Sequence[int], logits: F32) -> SessionSnapshot:
        return snapshot_of(self._hp, self._ctx, tokens, logits, self.layers)

    def restore(self, snapshot: SessionSnapshot) -> None:
        self.layers = restore_states(self._hp, snapshot)

    def clone(self) -> SequenceState:
        twin = ReferenceState(self._fwd, self._ctx)
        twin.layers = copy.deepcopy(self.layers)
        return twin

    @property
    def nbytes(self) -> int:
        total = 0
        for s in self.layers:
            total += s.raw.reserve(0).nbytes
            for comp in s.compressors():
                total += sum(g.reserve(0).nbytes for g in (comp.kv, comp.score, comp.rows))
        return total
