"""StateSession over a fake SequenceState: token bookkeeping, rewind floors from the
state's kept history, restore points, trims and in-memory checkpoints."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from ds4.domain.engine.dsv4_payload import SessionSnapshot
from ds4.domain.engine.state_session import StateSession
from ds4.domain.errors import Ds4Error
from ds4.domain.model.presets import DEFAULT_TINY_SHAPE, TINY_SHAPES
from ds4.ports.compute import SequenceState

HP = TINY_SHAPES[DEFAULT_TINY_SHAPE]
F32 = npt.NDArray[np.float32]


class FakeState:
    """Logits are a function of the positions' tokens; `kept_from` models trimmed
    history: rewinds to m need m - 1 >= kept_from."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.kept_from = 0
        self.fail_next = False
        self.evaluated = 0  # tokens run through forward, over the state's life

    @property
    def length(self) -> int:
        return len(self.ids)

    def _logits(self, upto: int) -> F32:
        out = np.zeros(HP.n_vocab, np.float32)
        out[sum(self.ids[:upto]) % HP.n_vocab] = 1.0
        return out

    def forward(self, tokens: npt.NDArray[np.int64], all_logits: bool) -> F32:
        if self.fail_next:
            raise Ds4Error("engine failure")
        start = len(self.ids)
        self.ids += [int(t) for t in tokens]
        self.evaluated += tokens.size
        ends = range(start + 1, len(self.ids) + 1) if all_logits else [len(self.ids)]
        return np.stack([self._logits(e) for e in ends])

    def forward_streams(
        self, tokens: npt.NDArray[np.int64], all_logits: bool, keep: int
    ) -> tuple[F32, F32]:
        """Each position's 'streams' (1, 1) hold the sum of the ids up to it."""
        logits = self.forward(tokens, all_logits)
        ends = range(len(self.ids) - min(keep, tokens.size) + 1, len(self.ids) + 1)
        streams = np.array([[[sum(self.ids[:e])]] for e in ends], np.float32).reshape(-1, 1, 1)
        return logits, streams

    def truncate(self, n: int) -> None:
        del self.ids[n:]

    def trim(self, keep_from: int) -> None:
        self.kept_from = max(self.kept_from, keep_from)

    def history_ok(self, m: int) -> bool:
        return m >= self.kept_from

    def snapshot(self, tokens: Sequence[int], logits: F32) -> SessionSnapshot:
        raise NotImplementedError

    def restore(self, snapshot: SessionSnapshot) -> None:
        raise NotImplementedError

    def clone(self) -> SequenceState:
        twin = FakeState()
        twin.ids, twin.kept_from = list(self.ids), self.kept_from
        return twin

    @property
    def nbytes(self) -> int:
        return 4 * len(self.ids)


def new_session(ctx: int = 256, history: int = 1024, owner: object = "runner") -> StateSession:
    return StateSession(HP, FakeState, ctx, owner=owner, rewind_history=history)


def test_prefill_eval_and_logits_follow_the_state() -> None:
    s = new_session()
    rows = s.prefill([1, 2, 3], all_logits=True)
    assert rows.shape == (3, HP.n_vocab) and list(s.tokens) == [1, 2, 3]
    assert int(s.eval(4).argmax()) == 10 and int(s.logits().argmax()) == 10
    with pytest.raises(ValueError, match="read-only"):
        s.logits()[0] = 1.0


def test_bad_tokens_and_overflow_are_refused_before_any_state_changes() -> None:
    s = new_session(ctx=4)
    with pytest.raises(Ds4Error, match="outside the vocabulary"):
        s.prefill([1, HP.n_vocab])
    with pytest.raises(Ds4Error, match="do not fit the context of 4"):
        s.prefill([1, 2, 3, 4, 5])
    assert list(s.tokens) == []


def test_a_failed_chunk_keeps_the_tokens_of_the_finished_ones() -> None:
    s = new_session()
    s.prefill([1, 2])
    state = s.state
    assert isinstance(state, FakeState)
    state.fail_next = True
    with pytest.raises(Ds4Error, match="engine failure"):
        s.eval(3)
    assert list(s.tokens) == [1, 2] and int(s.logits().argmax()) == 3


def test_rewind_floors_come_from_the_kept_history() -> None:
    s = new_session(history=40)
    s.prefill(list(range(1, 101)), chunk=10)
    assert s.rewind_floor(100) == 100 and s.rewind_floor(80) == 80
    assert s.rewind_floor(30) == 0  # trimmed away: only a recompute reaches it
    s.rewind(80)
    assert list(s.tokens) == list(range(1, 81))
    assert int(s.logits().argmax()) == sum(range(1, 81)) % HP.n_vocab
    with pytest.raises(Ds4Error, match="cannot rewind exactly"):
        s.rewind(30)


def test_checkpoints_restore_exactly_and_stay_reusable() -> None:
    s = new_session()
    s.prefill([5, 6, 7])
    cp = s.checkpoint()
    assert list(cp.tokens) == [5, 6, 7] and cp.nbytes == 12
    s.eval(8)
    s.restore(cp)
    assert list(s.tokens) == [5, 6, 7] and int(s.logits().argmax()) == 18
    s.eval(9)
    s.restore(cp)  # still the state at the checkpoint
    other = new_session()
    other.restore(cp)  # a sibling session of the same runner takes it too
    assert list(other.tokens) == [5, 6, 7]


def test_checkpoints_do_not_cross_runners_or_context_sizes() -> None:
    cp = new_session(owner="a").checkpoint()
    with pytest.raises(Ds4Error, match="another model runner"):
        new_session(owner="b").restore(cp)
    with pytest.raises(Ds4Error, match="context 256, not 128"):
        new_session(ctx=128, owner="a").restore(cp)


# ---- final streams and verified blocks (docs/mtp.md) -------------------------------


def test_final_streams_are_kept_for_the_last_positions_only_on_request() -> None:
    s = new_session()
    s.prefill([1, 2, 3])
    assert s.final_stream(2) is None  # not asked for: nothing kept
    s.retain_streams(3)
    s.prefill([4, 5, 6, 7], chunk=2)
    kept = {q: s.final_stream(q) for q in range(7)}
    assert [q for q, h in kept.items() if h is not None] == [4, 5, 6]
    last = kept[6]
    assert last is not None and not last.flags.writeable
    assert float(last[0, 0]) == 1 + 2 + 3 + 4 + 5 + 6 + 7  # position 6's own streams


def test_a_kept_stream_is_the_same_object_until_its_position_changes() -> None:
    s = new_session()
    s.retain_streams(8)
    s.prefill([1, 2, 3, 4])
    before = [s.final_stream(q) for q in range(4)]
    s.eval(5)
    assert all(s.final_stream(q) is h for q, h in enumerate(before))
    s.rewind(3)  # position 2 is evaluated again, 3 and 4 are gone
    assert s.final_stream(1) is before[1]
    assert s.final_stream(2) is not before[2] and s.final_stream(3) is None
    cp = s.checkpoint()
    s.prefill([9, 9])
    s.restore(cp)
    assert s.final_stream(1) is before[1] and s.final_stream(3) is None
    s.invalidate()
    assert s.final_stream(1) is None


def test_a_rewind_into_a_verified_block_takes_its_logits_row() -> None:
    s = new_session()
    s.prefill([1, 2, 3])
    rows = s.prefill([4, 5, 6, 7], all_logits=True)
    state = s.state
    assert isinstance(state, FakeState)
    evaluated = state.evaluated
    s.rewind(5)  # keeps 1..4 and 5: the block's second row
    assert state.evaluated == evaluated  # nothing evaluated again
    assert list(s.tokens) == [1, 2, 3, 4, 5]
    assert np.array_equal(s.logits(), rows[1])
    s.rewind(4)  # still inside the block
    assert state.evaluated == evaluated and np.array_equal(s.logits(), rows[0])
    twin = new_session()
    twin.prefill([1, 2, 3, 4])
    assert np.array_equal(s.logits(), twin.logits())
    s.rewind(2)  # before the block: the last kept token is evaluated again
    assert state.evaluated == evaluated + 1 and list(s.tokens) == [1, 2]


def test_a_long_all_logits_prefill_is_not_remembered() -> None:
    s = new_session(ctx=1024)
    s.prefill(list(range(1, 201)), all_logits=True)
    state = s.state
    assert isinstance(state, FakeState)
    evaluated = state.evaluated
    s.rewind(150)
    assert state.evaluated == evaluated + 1
