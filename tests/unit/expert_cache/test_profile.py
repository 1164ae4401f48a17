"""The expert profile file format (ds4.domain.expert_cache)."""

from __future__ import annotations

import json

import pytest

from ds4.domain.expert_cache import hottest, merged, parse_profile, profile_text


def test_round_trip_and_merge() -> None:
    counts = [3, 0, 1, 7, 2, 2]
    text = profile_text(2, 3, counts)
    assert parse_profile(text, 2, 3) == counts
    assert merged(counts, counts) == [6, 0, 2, 14, 4, 4]


def test_hottest_order_and_limit() -> None:
    counts = [3, 0, 7, 7, 2, 0]  # 2 layers x 3 experts
    assert hottest(counts, 3, 10) == [(0, 2), (1, 0), (0, 0), (1, 1)]  # unused left out
    assert hottest(counts, 3, 2) == [(0, 2), (1, 0)]


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ("{", "not JSON"),
        (json.dumps({"format": "other"}), "not a ds4-expert-profile"),
        (json.dumps({"format": "ds4-expert-profile", "version": 9}), "version 9"),
        (json.dumps({"format": "ds4-expert-profile", "version": 1, "n_layer": 3,
                     "n_expert": 3, "counts": []}), "3 layers x 3 experts"),
        (json.dumps({"format": "ds4-expert-profile", "version": 1, "n_layer": 2,
                     "n_expert": 3, "counts": [[1, 2, 3], [1, 2]]}), "counts[1]"),
        (json.dumps({"format": "ds4-expert-profile", "version": 1, "n_layer": 2,
                     "n_expert": 3, "counts": [[1, 2, 3], [1, -2, 0]]}), "-2"),
    ],
)  # fmt: skip
def test_bad_profiles_say_why(doc: str, says: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_profile(doc, 2, 3)
    assert says in str(err.value)
