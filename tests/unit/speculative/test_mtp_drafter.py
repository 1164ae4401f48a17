"""MtpDrafter over a fake MTP block and an EngineSession on a fake state: which rows the
block computes (H_q with the token after q), which it keeps, and where its window
starts when the session holds no streams."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from tests.unit.engine_session.test_state_session import HP, FakeState

from ds4.domain.engine.session import EngineSession, StateSpec
from ds4.domain.speculative import MtpDrafter
from ds4.ports.drafter import DraftState

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


class FakeBlock:
    """Rows are (position, hidden value, token); the output of a row is hidden + token,
    and its 'logits' pick (output value) mod V, so a test can follow the chain."""

    def __init__(self, model: FakeModel) -> None:
        self.model = model
        self.rows: list[tuple[int, float, int]] = []
        self._base = 0

    @property
    def base(self) -> int:
        return self._base

    @property
    def length(self) -> int:
        return self.rows[-1][0] + 1 if self.rows else self._base

    def restart(self, position: int) -> None:
        self.rows, self._base = [], position
        self.model.restarts.append(position)

    def truncate(self, n: int) -> None:
        if n <= self._base:
            self.restart(n)
        self.rows = [r for r in self.rows if r[0] < n]

    def trim(self, keep_from: int) -> None:
        pass

    def advance(self, hidden: F32, tokens: I64) -> F32:
        out = []
        for h, t in zip(hidden, tokens, strict=True):
            self.rows.append((self.length, float(h[0, 0]), int(t)))
            self.model.computed.append(self.rows[-1])
            out.append(float(h[0, 0]) + int(t))
        return np.array(out, np.float32).reshape(-1, 1, 1)

    def logits(self, streams: F32) -> F32:
        out = np.zeros((streams.shape[0], HP.n_vocab), np.float32)
        for i, s in enumerate(streams):
            out[i, int(s[0, 0]) % HP.n_vocab] = 1.0
        return out


class FakeModel:
    def __init__(self, window: int) -> None:
        self._window = window
        self.computed: list[tuple[int, float, int]] = []
        self.restarts: list[int] = []

    @property
    def window(self) -> int:
        return self._window

    def new_state(self) -> DraftState:
        return FakeBlock(self)


def session_with(tokens: list[int]) -> EngineSession:
    s = EngineSession(StateSpec(HP, FakeState, 256, "runner"))
    s.prefill(tokens)
    return s


def test_rows_pair_each_positions_streams_with_the_token_after_it() -> None:
    session = EngineSession(StateSpec(HP, FakeState, 256, "runner"))
    model = FakeModel(window=8)
    drafter = MtpDrafter(model, session)  # streams are kept from now on
    session.prefill([1, 2, 3])
    drafts = drafter.draft(4, 3)
    # rows 0..2: H_q (sum of ids up to q) with x_{q+1}; row 2 takes the sampled 4
    assert model.computed[:3] == [(0, 1.0, 2), (1, 3.0, 3), (2, 6.0, 4)]
    # the chain: 6 + 4 = 10 -> d1 = 10; row 3 pairs that output with 10 -> 20; then 40
    assert drafts == [10, 20, 40]
    assert model.computed[3:] == [(3, 10.0, 10), (4, 20.0, 20)]


def test_current_rows_are_reused_and_stale_ones_recomputed() -> None:
    session = EngineSession(StateSpec(HP, FakeState, 256, "runner"))
    model = FakeModel(window=8)
    drafter = MtpDrafter(model, session)
    session.prefill([1, 2, 3])
    drafter.draft(4, 2)
    session.prefill([4, 5])  # the verified block: 4 and one draft kept
    model.computed.clear()
    drafter.draft(6, 1)
    # rows 0..1 are still current; row 2 (paired with 4 before) is kept too, the last
    # row is always recomputed; rows 3 (chained before) and 4 are new
    assert [r[0] for r in model.computed] == [3, 4]
    assert model.computed[0] == (3, 10.0, 5) and model.computed[1] == (4, 15.0, 6)
    session.rewind(2)  # position 1 evaluated again: a new streams array for it
    model.computed.clear()
    drafter.draft(9, 1)
    assert [r[0] for r in model.computed] == [1]  # row 0 kept, row 1 recomputed
    assert model.computed[0] == (1, 3.0, 9)


def test_the_window_starts_where_the_sessions_streams_start() -> None:
    session = session_with([1, 2, 3, 4, 5])  # evaluated before the drafter: no streams
    model = FakeModel(window=8)
    drafter = MtpDrafter(model, session)
    assert drafter.draft(6, 2) == []  # nothing to draft from yet
    session.prefill([6, 7])
    drafter.draft(8, 1)
    assert model.restarts[-1] == 5 and [r[0] for r in model.computed] == [5, 6]


def test_only_the_last_window_positions_are_computed() -> None:
    session = EngineSession(StateSpec(HP, FakeState, 256, "runner"))
    model = FakeModel(window=4)
    drafter = MtpDrafter(model, session)
    session.prefill(list(range(1, 21)))
    drafter.draft(21, 1)
    assert [r[0] for r in model.computed] == [16, 17, 18, 19]


def test_a_row_is_stale_when_the_token_after_it_changed() -> None:
    session = EngineSession(StateSpec(HP, FakeState, 256, "runner"))
    model = FakeModel(window=8)
    drafter = MtpDrafter(model, session)
    session.prefill([1, 2, 3, 4])
    drafter.draft(5, 1)  # rows 0..3, row 2 paired with 4
    session.rewind(3)
    session.prefill([7])  # position 3 now holds 7: row 2 must pair H_2 with 7
    model.computed.clear()
    drafter.draft(8, 1)
    assert model.computed == [(2, 6.0, 7), (3, 13.0, 8)]
