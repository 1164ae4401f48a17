"""The expert budget: flag values and the automatic size (ds4.domain.expert_cache)."""

from __future__ import annotations

import pytest

from ds4.domain.expert_cache import GIB, CacheSpec, cache_slots, parse_cache_spec


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("64", CacheSpec(experts=64)),
        ("1", CacheSpec(experts=1)),
        ("12GB", CacheSpec(bytes=12 * GIB)),
        ("0.5gb", CacheSpec(bytes=GIB // 2)),
        ("3G", CacheSpec(bytes=3 * GIB)),
    ],
)
def test_specs(text: str, want: CacheSpec) -> None:
    assert parse_cache_spec(text) == want


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("0", "1..16777216"),
        ("99999999", "1..16777216"),
        ("1.5", "whole number"),
        ("0GB", "(0,"),
        ("-3GB", "not N"),
        ("12MB", "not N"),
        ("", "not N"),
        ("9999999GB", "(0,"),
    ],
)
def test_bad_specs_say_why(text: str, says: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_cache_spec(text)
    assert says in str(err.value)


def _slots(spec: CacheSpec | None, available: int = 100 * GIB) -> int:
    return cache_slots(
        spec, expert_bytes=GIB, total_experts=50, available=available, resident=10 * GIB,
        kv_and_scratch=GIB,
    ).slots  # fmt: skip


def test_counts_bytes_and_auto() -> None:
    assert _slots(CacheSpec(experts=7)) == 7
    assert _slots(CacheSpec(experts=700)) == 50  # never more than the model has
    assert _slots(CacheSpec(bytes=5 * GIB + 1)) == 5
    assert _slots(CacheSpec(bytes=1)) == 1  # one slot at least: the forward needs one
    assert _slots(None, available=30 * GIB) == 19  # 30 - 10 resident - 1 KV/scratch
    assert _slots(None, available=5 * GIB) == 1  # nothing left: still one
    assert _slots(None) == 50


def test_auto_reason_names_the_terms() -> None:
    b = cache_slots(None, expert_bytes=GIB, total_experts=9, available=20 * GIB,
                    resident=2 * GIB, kv_and_scratch=GIB)  # fmt: skip
    assert "20.00 GiB available" in b.reason and "2.00 GiB resident" in b.reason


def test_a_model_without_experts_is_refused() -> None:
    with pytest.raises(ValueError, match="no routed experts"):
        cache_slots(None, expert_bytes=0, total_experts=0, available=GIB, resident=0,
                    kv_and_scratch=0)  # fmt: skip
