"""The sampler's mask step (domain/sampling.py): packed bits to allowed ids, refused
ids at -inf, and the draw and the arg-max never leaving the allowed set."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4.domain.sampling import (
    SamplingParams,
    XorShiftStar,
    allowed_ids,
    argmax,
    masked_logits,
    sample,
)


def pack(allowed: list[int], vocab: int) -> np.ndarray:
    """The llguidance layout: bit i % 32 of word i // 32."""
    words = np.zeros((vocab + 31) // 32, dtype=np.uint32)
    for i in allowed:
        words[i // 32] |= np.uint32(1) << np.uint32(i % 32)
    return words.view(np.int32)


def test_bits_unpack_to_their_ids_little_endian_within_each_word() -> None:
    mask = pack([0, 31, 32, 69], 70)
    assert np.flatnonzero(allowed_ids(mask, 70)).tolist() == [0, 31, 32, 69]


def test_ids_past_the_mask_are_refused() -> None:
    mask = pack([1], 32)
    allowed = allowed_ids(mask, 40)
    assert allowed.size == 40 and np.flatnonzero(allowed).tolist() == [1]


def test_masked_logits_keep_allowed_values_and_refuse_the_rest() -> None:
    logits = np.arange(8, dtype=np.float32)
    out = masked_logits(logits, pack([2, 5], 8))
    assert out[2] == 2 and out[5] == 5
    assert np.isneginf(np.delete(out, [2, 5])).all()
    assert logits[7] == 7  # the input is not changed


def test_greedy_takes_the_best_allowed_token_not_the_best_token() -> None:
    logits = np.array([0.0, 9.0, 1.0, 3.0], dtype=np.float32)
    assert argmax(masked_logits(logits, pack([0, 2], 4))) == 2


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 299), min_size=1, max_size=20, unique=True),
    st.integers(1, 2**62),
    st.sampled_from([0.5, 1.0, 2.0]),
    st.sampled_from([0, 5, 40]),
)
def test_a_sampled_token_is_always_allowed(
    allowed: list[int], seed: int, temperature: float, top_k: int
) -> None:
    logits = np.random.default_rng(seed % 2**32).standard_normal(300).astype(np.float32) * 4
    params = SamplingParams(temperature=temperature, top_k=top_k, min_p=0.05, seed=seed)
    rng = XorShiftStar(seed)
    view = masked_logits(logits, pack(allowed, 300))
    for _ in range(5):
        assert sample(view, params, rng) in allowed
