"""EngineSession through loop.prefill: longest-prefix reuse, exact rewind points, cancellation,
payloads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.fake_compute import FakeComputeSession
from tests.support.sessions import prefilled

from ds4.domain.engine.cancel import CancelledError
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import PrefillProgress


def make(
    ctx: int = 64, rewind_step: int = 1, chunk: int = 0
) -> tuple[EngineSession, FakeComputeSession]:
    compute = FakeComputeSession(ctx=ctx, rewind_step=rewind_step)
    return EngineSession(compute, chunk=chunk), compute


def test_first_sync_evaluates_everything_and_reuses_nothing() -> None:
    session, compute = make()
    assert prefilled(session, [1, 2, 3]) == 0
    assert compute.evaluated == [1, 2, 3]
    assert list(session.tokens) == [1, 2, 3]


def test_extension_of_the_live_state_only_evaluates_the_suffix() -> None:
    session, compute = make()
    prefilled(session, [1, 2, 3])
    compute.evaluated.clear()
    assert prefilled(session, [1, 2, 3, 4, 5]) == 3
    assert compute.evaluated == [4, 5]


def test_divergent_prompt_rewinds_to_the_common_prefix() -> None:
    session, compute = make()
    prefilled(session, [1, 2, 3, 4, 5, 6])
    compute.evaluated.clear()
    assert prefilled(session, [1, 2, 3, 9, 9]) == 3
    assert compute.evaluated == [9, 9]
    assert list(session.tokens) == [1, 2, 3, 9, 9]


def test_rewind_falls_back_to_the_last_exact_point() -> None:
    session, compute = make(rewind_step=4)
    prefilled(session, list(range(10)))
    compute.evaluated.clear()
    prompt = [*range(7), 50, 51]
    assert prefilled(session, prompt) == 4  # common prefix 7, but only 4 is an exact rewind
    assert compute.evaluated == [4, 5, 6, 50, 51]


def test_no_safe_rewind_point_rebuilds_from_zero() -> None:
    session, compute = make(rewind_step=8)
    prefilled(session, list(range(10)))
    compute.evaluated.clear()
    assert prefilled(session, [0, 1, 2, 99]) == 0
    assert compute.evaluated == [0, 1, 2, 99]


def test_identical_prompt_evaluates_nothing_and_keeps_logits() -> None:
    session, compute = make()
    prefilled(session, [5, 6, 7])
    before = session.logits().copy()
    compute.evaluated.clear()
    assert prefilled(session, [5, 6, 7]) == 3
    assert compute.evaluated == []
    np.testing.assert_array_equal(session.logits(), before)


def test_prompt_that_is_a_prefix_of_the_live_state_reevaluates_its_last_token() -> None:
    session, compute = make()
    prefilled(session, [5, 6, 7, 8, 9])
    compute.evaluated.clear()
    assert prefilled(session, [5, 6, 7]) == 2
    assert compute.evaluated == [7]
    np.testing.assert_array_equal(session.logits(), compute.logits_after([5, 6, 7]))


@pytest.mark.parametrize("prompt_len", [0, 16, 17])
def test_prompt_that_leaves_no_free_slot_is_rejected(prompt_len: int) -> None:
    session, _ = make(ctx=16)
    with pytest.raises(Ds4Error, match=r"^prompt exceeds context$"):
        prefilled(session, list(range(prompt_len)))


def test_chunked_prefill_reports_progress_per_chunk() -> None:
    session, compute = make(chunk=4)
    seen: list[PrefillProgress] = []
    prefilled(session, list(range(10)), progress=seen)
    assert seen == [PrefillProgress(4, 10), PrefillProgress(8, 10), PrefillProgress(10, 10)]
    assert compute.prefill_calls == [4, 4, 2]


def test_cancel_stops_at_a_chunk_boundary_and_a_retry_reuses_the_work() -> None:
    session, compute = make(chunk=4)
    seen: list[PrefillProgress] = []
    with pytest.raises(CancelledError):
        prefilled(session, list(range(10)), progress=seen, cancel=lambda: len(seen) >= 2)
    assert list(session.tokens) == list(range(8))
    compute.evaluated.clear()
    assert prefilled(session, list(range(10))) == 8
    assert compute.evaluated == [8, 9]


def test_eval_past_the_context_is_an_error() -> None:
    session, _ = make(ctx=4)
    prefilled(session, [1, 2, 3])
    session.eval(4)
    with pytest.raises(Ds4Error, match="context is full"):
        session.eval(5)


def test_payload_reload_then_decode_equals_uninterrupted_decode() -> None:
    session, _ = make()
    prefilled(session, [3, 1, 4, 1, 5])
    saved = session.payload()
    straight = [session.eval(t).copy() for t in (9, 2, 6)]
    other, _ = make()
    other.load_payload(saved)
    np.testing.assert_array_equal(
        other.logits(), FakeComputeSession().logits_after([3, 1, 4, 1, 5])
    )
    resumed = [other.eval(t) for t in (9, 2, 6)]
    for a, b in zip(straight, resumed, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_bad_payload_is_an_error_and_leaves_an_empty_state() -> None:
    session, _ = make()
    prefilled(session, [1, 2])
    with pytest.raises(Ds4Error):
        session.load_payload(b"garbage")
    assert session.pos == 0


@settings(max_examples=60, deadline=None)
@given(
    live=st.lists(st.integers(0, 5), max_size=20),
    prompt=st.lists(st.integers(0, 5), min_size=1, max_size=20),
    step=st.integers(1, 6),
)
def test_prefill_always_lands_on_the_prompt_with_fresh_logits(
    live: list[int], prompt: list[int], step: int
) -> None:
    session, compute = make(ctx=32, rewind_step=step)
    if live:
        prefilled(session, live)
    compute.evaluated.clear()
    reused = prefilled(session, prompt)
    assert list(session.tokens) == prompt
    assert compute.evaluated == prompt[reused:]
    assert reused <= session.common_prefix(prompt)
    np.testing.assert_array_equal(session.logits(), compute.logits_after(prompt))


@settings(max_examples=60, deadline=None)
@given(
    live=st.lists(st.integers(0, 5), max_size=20),
    prompt=st.lists(st.integers(0, 5), min_size=1, max_size=40),
    step=st.integers(1, 6),
)
def test_reusable_says_what_reuse_keeps_without_touching_the_state(
    live: list[int], prompt: list[int], step: int
) -> None:
    """The slot choice of several live sessions asks `reusable`; it must agree with the
    prefill that follows."""
    session, compute = make(ctx=32, rewind_step=step)
    if live:
        prefilled(session, live)
    evaluated = len(compute.evaluated)
    kept = session.reusable(prompt)
    assert list(session.tokens) == live and len(compute.evaluated) == evaluated
    if len(prompt) >= session.ctx:
        assert kept == 0
        return
    assert prefilled(session, prompt) == kept
