"""Reply budgets (docs/reference/eval.md §4): when the closer forces </think>."""

from __future__ import annotations

import numpy as np

from ds4.domain.eval.prompts import HARD, NATURAL, SOFT, ReplyLimits, ThinkCloser, token_rank

CLOSE = 7
VOCAB = 20


def logits(best: int, close_rank: int | None = None) -> np.ndarray:
    """`best` on top; `</think>` at rank `close_rank` (1-based) when given."""
    out = np.zeros(VOCAB, dtype=np.float32)
    out[best] = 10.0
    if close_rank == 1:
        out[CLOSE] = 11.0
    elif close_rank is not None:
        for k in range(close_rank - 2):  # tokens between the best and </think>
            out[10 + k] = 9.0 - k * 0.1
        out[CLOSE] = 5.0
    return out


def test_rank_counts_higher_logits_and_earlier_ties() -> None:
    x = np.array([1.0, 5.0, 5.0, 3.0], dtype=np.float32)
    assert token_rank(x, 1) == 1
    assert token_rank(x, 2) == 2  # tied with 1, which has the lower id
    assert token_rank(x, 3) == 3
    assert token_rank(x, 0) == 4


def test_nothing_is_forced_with_room_left() -> None:
    closer = ThinkCloser([CLOSE], ReplyLimits(soft=10, hard=5, rank=3), limit=100)
    assert closer(logits(1, close_rank=1), 0, True) is None
    assert closer.record is None


def test_hard_close_forces_the_whole_sequence_once() -> None:
    closer = ThinkCloser([CLOSE, 3], ReplyLimits(soft=10, hard=5, rank=3), limit=20)
    assert closer(logits(1), 14, True) is None  # remaining 6 > hard 5; two tokens: no soft
    assert closer(logits(1), 15, True) == CLOSE  # remaining 5: hard close
    assert closer(logits(1), 16, True) == 3  # the rest of the sequence
    assert closer(logits(1), 17, False) is None  # reasoning is over
    assert closer.record is not None
    assert (closer.record.kind, closer.record.token_index, closer.record.remaining_budget) == (
        HARD,
        16,
        5,
    )


def test_soft_close_needs_a_single_token_within_the_rank() -> None:
    limits = ReplyLimits(soft=10, hard=2, rank=3)
    closer = ThinkCloser([CLOSE], limits, limit=20)
    assert closer(logits(1, close_rank=5), 12, True) is None  # remaining 8, rank 5 > 3
    assert closer(logits(1, close_rank=3), 13, True) == CLOSE
    assert closer.record is not None
    assert (closer.record.kind, closer.record.rank, closer.record.remaining_budget) == (SOFT, 3, 7)


def test_natural_close_is_recorded_when_reasoning_ends_by_itself() -> None:
    closer = ThinkCloser([CLOSE], ReplyLimits(soft=10, hard=2, rank=3), limit=100)
    assert closer(logits(1), 0, True) is None
    assert closer(logits(1), 5, False) is None
    assert closer.record is not None
    assert (closer.record.kind, closer.record.token_index) == (NATURAL, 5)


def test_natural_close_on_the_last_token_is_seen_at_finish() -> None:
    closer = ThinkCloser([CLOSE], ReplyLimits(soft=10, hard=2, rank=3), limit=100)
    closer(logits(1), 0, True)
    record = closer.finish("abc</think>", 4)
    assert record is not None and record.kind == NATURAL and record.token_index == 4


def test_never_thinking_records_nothing() -> None:
    closer = ThinkCloser([CLOSE], ReplyLimits(soft=10, hard=5, rank=3), limit=6)
    assert closer(logits(1), 3, False) is None
    assert closer.finish("text", 4) is None
