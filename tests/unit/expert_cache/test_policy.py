"""The expert cache's eviction policies as pure replays (ds4.domain.expert_cache)."""

from __future__ import annotations

import random

import pytest

from ds4.domain.expert_cache import ExpertCacheModel, optimal_hits, replay


def test_lru_evicts_the_least_recently_used() -> None:
    cache = ExpertCacheModel(2, "lru")
    for key in (1, 2, 1):
        cache.access(key)
    assert cache.victim() == 2
    assert not cache.access(3)  # 2 goes
    assert sorted(cache.resident) == [1, 3]


def test_decayed_keeps_a_hot_expert_through_a_burst_that_lru_lets_flush_it() -> None:
    # key 0 is used on every step, then a run of one-off keys; then 0 again
    trace = [0] * 8 + [10, 11, 12] + [0]
    lru, decayed = replay(trace, 2, "lru"), replay(trace, 2, "decayed", half_life=64)
    assert lru.hits == 7  # the last use of 0 misses: 11 and 12 pushed it out
    assert decayed.hits == 8


def test_decay_lets_an_old_favourite_go() -> None:
    """With a short half-life, an expert hot long ago loses to one used recently twice."""
    trace = [0] * 4 + [1] * 40 + [2, 2, 3]
    cache = ExpertCacheModel(2, "decayed", half_life=2)
    for key in trace[:-1]:
        cache.access(key)
    assert sorted(cache.resident) == [1, 2]
    cache = ExpertCacheModel(2, "decayed", half_life=1e9)  # no decay: plain counts
    for key in [0] * 50 + [1, 1, 2]:
        cache.access(key)
    assert cache.victim() == 2  # 0's 50 uses keep it; 2 has the lowest count


def test_ties_go_to_the_least_recently_used() -> None:
    cache = ExpertCacheModel(3, "decayed", half_life=1e9)
    for key in (5, 6, 7):
        cache.access(key)
    assert cache.victim() == 5


def test_belady_bounds_both_policies() -> None:
    rng = random.Random(3)
    trace = [rng.choice([0, 0, 0, 1, 2, 3, 4, 5, 6, 7]) for _ in range(2000)]
    for slots in (1, 2, 4):
        best = optimal_hits(trace, slots).hits
        assert replay(trace, slots, "lru").hits <= best
        assert replay(trace, slots, "decayed").hits <= best
    assert optimal_hits([1, 2, 1, 3, 1, 2], 2).hits == 2  # 1 twice; 2 makes room for 3


def test_replay_counts_and_rate() -> None:
    r = replay([1, 1, 1, 2], 1, "lru")
    assert (r.accesses, r.hits, r.hit_rate) == (4, 2, 0.5)
    assert replay([], 1, "lru").hit_rate == 0.0


@pytest.mark.parametrize(
    ("slots", "policy", "half_life"), [(0, "lru", 1.0), (1, "fifo", 1.0), (1, "lru", 0.0)]
)
def test_bad_parameters_are_refused(slots: int, policy: str, half_life: float) -> None:
    with pytest.raises(ValueError):
        ExpertCacheModel(slots, policy, half_life)
