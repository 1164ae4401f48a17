"""Speculative decoding (docs/mtp.md): MtpDrafter, greedy proposals from the MTP block for
one session, for the main model to verify.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.session import EngineSession
from ds4.domain.sampling import argmax
from ds4.ports.drafter import DraftModel

# --- mtp drafter ---
# MtpDrafter: greedy proposals from the MTP block for one session (docs/mtp.md).
#
# The block's row at position q pairs the main model's final HC streams H_q with the
# embedding of the token that follows, x_{q+1}, and predicts x_{q+2} (the pairing the
# block was trained with). A row's cached key depends on nothing else, so the block's
# window cache is a pure function of the session: this keeps, per cached row, the very
# H_q array the session handed out and the token it was paired with, and recomputes a
# row as soon as either is no longer the session's (a rewind, a restored checkpoint or
# payload, another prompt). Rows the session holds no streams for (after a payload
# load) cannot be rebuilt: the window then starts after them (`restart`).
#
# One draft, with the session holding positions 0..P-1 and `token` sampled for P:
# 1. bring the rows P-W..P-2 up to date and add row P-1 = (H_{P-1}, token) in one
#    batched block evaluation; its output's arg-max is d1 (a guess at x_{P+1});
# 2. chain: row P + i - 1 pairs the previous step's output streams with d_i; its
#    arg-max is d_{i+1};
# 3. drop the chained rows (their H was the block's own guess): after verification the
#    session has the real H for the accepted positions, and the next draft rebuilds
#    them from it.

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class _Row:
    hidden: F32  # the session's final-stream array the row was computed from
    token: int  # the token it was paired with


@dataclass
class DraftStats:
    blocks: int = 0  # verifications with at least one draft
    proposed: int = 0
    accepted: int = 0

    @property
    def acceptance(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0


class MtpDrafter:
    def __init__(self, model: DraftModel, session: EngineSession) -> None:
        self._model = model
        self._session = session
        self._window = model.window
        self._state = model.new_state()
        self._rows: dict[int, _Row] = {}
        self.stats = DraftStats()
        self.first_logits: F32 | None = None  # the block's logits at the last d1 (tests)
        session.retain_streams(self._window)  # every position a query can see

    def draft(self, token: int, limit: int) -> list[int]:
        tokens = self._session.tokens
        last = len(tokens) - 1
        if limit <= 0 or last < 0:
            return []
        lo = self._window_start(last)
        if lo is None:
            return []  # no streams for the last position: nothing to draft from
        keep = self._reusable(lo, last, tokens, token)
        positions = range(keep, last + 1)
        streams = [self._stream(q) for q in positions]
        follow = [tokens[q + 1] if q < last else token for q in positions]
        out = self._state.advance(np.stack(streams), np.asarray(follow, dtype=np.int64))
        for q, h, t in zip(positions, streams, follow, strict=True):
            self._rows[q] = _Row(h, t)
        x = out[-1:]
        self.first_logits = self._state.logits(x)[0]
        drafts = [argmax(self.first_logits)]
        try:
            while len(drafts) < limit:
                x = self._state.advance(x, np.asarray(drafts[-1:], dtype=np.int64))
                drafts.append(argmax(self._state.logits(x)[0]))
        finally:
            self._state.truncate(last + 1)  # the chained rows were guesses
        return drafts

    def settle(self, proposed: int, accepted: int) -> None:
        self.stats.blocks += 1
        self.stats.proposed += proposed
        self.stats.accepted += accepted

    # ---- the window ----------------------------------------------------------

    def _stream(self, q: int) -> F32:
        h = self._session.final_stream(q)
        assert h is not None  # _window_start checked every position from lo
        return h

    def _window_start(self, last: int) -> int | None:
        """The first position the next query should see: the window's start, or later
        where the session holds no streams (None if it holds none for `last`)."""
        if self._session.final_stream(last) is None:
            return None
        lo = last
        need = max(0, last - self._window + 1)
        while lo > need and self._session.final_stream(lo - 1) is not None:
            lo -= 1
        return lo

    def _reusable(self, lo: int, last: int, tokens: Sequence[int], token: int) -> int:
        """Cut the block's state back to its rows that are still current from `lo` on
        (restarting it at lo if those cannot be trusted); the first position to compute.
        The last position is always recomputed: its output starts the chain."""
        st = self._state
        need = max(0, last - self._window + 1)
        trusted = st.base <= lo <= st.length and lo in (need, st.base)
        keep = lo
        if trusted:
            while keep < min(st.length, last) and self._current(keep, tokens, last, token):
                keep += 1
            st.truncate(keep)
        else:
            st.restart(lo)
        for q in [q for q in self._rows if q >= keep or q < need]:
            del self._rows[q]
        st.trim(need)
        return keep

    def _current(self, q: int, tokens: Sequence[int], last: int, token: int) -> bool:
        row = self._rows.get(q)
        follow = tokens[q + 1] if q < last else token
        return (
            row is not None
            and row.hidden is self._session.final_stream(q)
            and (row.token == follow)
        )
