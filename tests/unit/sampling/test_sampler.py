"""The sampler of docs/reference/server.md §4.7: RNG bits, candidate sets, determinism, greedy."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ds4.domain.sampling import (
    SamplingParams,
    XorShiftStar,
    argmax,
    candidates,
    relative_probabilities,
    sample,
    seed_from_bytes,
)

MASK = (1 << 64) - 1

logit_arrays = arrays(
    np.float32,
    st.integers(2, 60),
    elements=st.floats(-20, 20, width=32, allow_nan=False),
)


def test_rng_first_step_from_seed_one() -> None:
    # x = 1: x ^= x>>12 -> 1; x ^= x<<25 -> 0x2000001; x ^= x>>27 -> 0x2000001.
    rng = XorShiftStar(1)
    assert rng.next_u64() == (0x2000001 * 0x2545F4914F6CDD1D) & MASK
    assert rng.state == 0x2000001
    assert [rng.next_u64(), rng.next_u64()] == [0xABCFA6A8E079651D, 0xB9D10D8FEB731F57]


def test_rng_zero_seed_is_replaced() -> None:
    assert XorShiftStar(0).state == 0x9E3779B97F4A7C15
    assert XorShiftStar(1 << 64).state == 0x9E3779B97F4A7C15


def test_uniform_uses_the_top_24_bits() -> None:
    rng, twin = XorShiftStar(7), XorShiftStar(7)
    assert rng.uniform() == ((twin.next_u64() >> 40) & 0xFFFFFF) / 2**24


def test_seed_from_bytes_is_positive() -> None:
    assert seed_from_bytes(b"\0" * 8) == 1
    assert 0 < seed_from_bytes(b"\xff" * 8) < 2**63


def test_greedy_is_the_first_largest_finite_logit() -> None:
    logits = np.array([1.0, np.nan, 3.0, np.inf, 3.0], dtype=np.float32)
    assert argmax(logits) == 2
    for temperature in (0.0, -1.0, float("nan")):
        rng = XorShiftStar(5)
        assert sample(logits, SamplingParams(temperature=temperature), rng) == 2
        assert rng.state == XorShiftStar(5).state  # greedy draws nothing


def test_top_k_keeps_the_k_best_in_descending_order() -> None:
    logits = np.array([0.5, 3.0, -1.0, 2.0, 2.5], dtype=np.float32)
    ids, probs = candidates(logits, SamplingParams(top_k=3))
    assert ids.tolist() == [1, 4, 3]
    assert np.all(np.diff(probs) <= 0)


def test_min_p_is_relative_to_the_best_candidate() -> None:
    logits = np.log(np.array([1.0, 0.5, 0.09, 0.11], dtype=np.float32))
    ids, _ = candidates(logits, SamplingParams(min_p=0.1))
    assert ids.tolist() == [0, 1, 3]  # unsorted path: vocabulary order


def test_top_p_keeps_the_shortest_run_reaching_the_mass() -> None:
    logits = np.log(np.array([0.1, 0.5, 0.3, 0.1], dtype=np.float32))
    assert candidates(logits, SamplingParams(top_p=0.79))[0].tolist() == [1, 2]
    assert candidates(logits, SamplingParams(top_p=0.81))[0].tolist()[:3] == [1, 2, 0]


def test_out_of_range_settings_mean_off() -> None:
    p = SamplingParams(top_p=1.5, min_p=-1, top_k=5000).normalized()
    assert (p.top_p, p.min_p, p.top_k) == (1.0, 0.0, 1024)
    assert SamplingParams(top_p=0.0).normalized().top_p == 1.0


def test_temperature_sharpens_and_flattens() -> None:
    logits = np.array([0.0, 1.0], dtype=np.float32)
    assert relative_probabilities(logits, 0.1)[0] < relative_probabilities(logits, 10.0)[0]


def test_draws_follow_the_distribution() -> None:
    logits = np.log(np.array([0.7, 0.2, 0.1], dtype=np.float32))
    rng = XorShiftStar(12345)
    counts = np.bincount([sample(logits, SamplingParams(), rng) for _ in range(3000)], minlength=3)
    np.testing.assert_allclose(counts / 3000, [0.7, 0.2, 0.1], atol=0.04)


def test_non_finite_logits_are_never_sampled() -> None:
    logits = np.array([np.nan, 0.0, -np.inf, 0.0, np.inf], dtype=np.float32)
    rng = XorShiftStar(3)
    # +inf is not finite either: only ids 1 and 3 are candidates.
    assert {sample(logits, SamplingParams(), rng) for _ in range(200)} == {1, 3}


def _params() -> st.SearchStrategy[SamplingParams]:
    return st.builds(
        SamplingParams,
        temperature=st.floats(0.05, 5),
        top_k=st.integers(-1, 8),
        top_p=st.floats(0.01, 1.0),
        min_p=st.floats(0, 0.5),
        seed=st.integers(1, 2**64 - 1),
    )


@settings(max_examples=150, deadline=None)
@given(logits=logit_arrays, params=_params())
def test_sample_is_deterministic_per_seed_and_within_the_candidates(
    logits: npt.NDArray[np.float32], params: SamplingParams
) -> None:
    first = [sample(logits, params, XorShiftStar(params.seed)) for _ in range(2)]
    assert first[0] == first[1]
    ids, _ = candidates(logits, params)
    assert first[0] in ids.tolist()


@settings(max_examples=150, deadline=None)
@given(logits=logit_arrays, params=_params())
def test_candidate_sets_obey_each_filter(
    logits: npt.NDArray[np.float32], params: SamplingParams
) -> None:
    p = params.normalized()
    ids, probs = candidates(logits, p)
    full = relative_probabilities(logits, p.temperature)
    assert ids.size >= 1
    assert int(np.argmax(full)) in ids.tolist() or full[ids[0]] == full.max()
    np.testing.assert_array_equal(probs, full[ids])
    if p.top_k > 0:
        assert ids.size <= p.top_k
        assert probs.min() >= np.sort(full)[::-1][min(p.top_k, full.size) - 1]
    assert np.all(probs >= np.float32(p.min_p) * full.max() * np.float32(1 - 1e-6))
    if p.top_p < 1.0 and p.top_k <= 0 and p.min_p == 0.0:
        # The shortest descending run whose mass reaches top_p (float32 slack).
        mass = probs.astype(np.float64) / full.astype(np.float64).sum()
        assert mass.sum() >= p.top_p - 1e-4
        assert mass[:-1].sum() < p.top_p + 1e-4


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_different_seeds_give_different_streams(seed: int) -> None:
    logits = np.zeros(1000, dtype=np.float32)
    draws = [sample(logits, SamplingParams(), XorShiftStar(seed + k * 10)) for k in range(5)]
    assert len(set(draws)) > 1
