"""The slot choice of --sessions N (serving/prepare.py): a request continues the slot
it keeps the most of (at least half of that slot's state), else takes an empty slot,
else the stalest."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ds4.domain.serving.prepare import (
    NEVER_USED,
    SlotCandidate,
    SlotLedger,
    choose_slot,
)


def slot(i: int, live: int, reusable: int, last_used: int) -> SlotCandidate:
    return SlotCandidate(i, live, reusable, last_used)


def test_a_follow_up_goes_to_the_slot_it_continues_furthest() -> None:
    candidates = [slot(0, 900, 880, 5), slot(1, 300, 300, 7), slot(2, 0, 0, NEVER_USED)]
    assert choose_slot(candidates) == 0


def test_sharing_only_an_opening_is_not_a_continuation() -> None:
    """Same system prompt (100 tokens) as slot 0's conversation of 1000: the request
    leaves that conversation alone and takes the empty slot."""
    candidates = [slot(0, 1000, 100, 3), slot(1, 0, 0, NEVER_USED)]
    assert choose_slot(candidates) == 1


def test_without_a_continuation_an_empty_slot_then_the_stalest() -> None:
    assert choose_slot([slot(0, 50, 1, 1), slot(1, 0, 0, 9), slot(2, 70, 0, 4)]) == 1
    assert choose_slot([slot(0, 50, 1, 6), slot(1, 40, 0, 9), slot(2, 70, 2, 4)]) == 2


def test_ties_go_to_the_stalest_then_the_lowest_slot() -> None:
    assert choose_slot([slot(0, 10, 10, 8), slot(1, 10, 10, 2)]) == 1
    assert choose_slot([slot(1, 0, 0, NEVER_USED), slot(0, 0, 0, NEVER_USED)]) == 0


def test_an_empty_choice_is_an_error() -> None:
    with pytest.raises(ValueError):
        choose_slot([])


@given(
    st.lists(
        st.tuples(st.integers(0, 100), st.integers(0, 100), st.integers(-1, 50)),
        min_size=1,
        max_size=8,
    )
)
def test_the_choice_is_one_of_the_candidates_and_prefers_continuations(
    rows: list[tuple[int, int, int]],
) -> None:
    candidates = [slot(i, live, min(kept, live), last) for i, (live, kept, last) in enumerate(rows)]
    chosen = next(c for c in candidates if c.slot == choose_slot(candidates))
    continued = [c for c in candidates if c.continued]
    if continued:
        assert chosen.continued and chosen.reusable == max(c.reusable for c in continued)
    else:
        assert (chosen.live > 0) == all(c.live > 0 for c in candidates)  # empty first


def test_the_ledger_orders_slots_by_when_their_last_job_ended() -> None:
    ledger = SlotLedger(3)
    assert [ledger.last_used(i) for i in range(3)] == [NEVER_USED] * 3
    ledger.ended(2)
    ledger.ended(0)
    ledger.ended(2)
    assert ledger.last_used(0) < ledger.last_used(2)
    assert ledger.last_used(1) == NEVER_USED
