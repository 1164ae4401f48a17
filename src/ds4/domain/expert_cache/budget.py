"""The expert cache's budget: `--ssd-streaming-cache-experts N|NGB` read, and the
automatic size from available memory (docs/ssd-streaming.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass

GIB = 1 << 30
MAX_GB = 1 << 20  # a budget of a pebibyte is a typo, not a machine
MAX_EXPERTS = 1 << 24

_SPEC = re.compile(r"^(\d+(?:\.\d+)?)\s*(gb|g|gib)?$", re.IGNORECASE)


@dataclass(frozen=True)
class CacheSpec:
    """A budget as given: a count of experts or a number of bytes."""

    experts: int | None = None
    bytes: int | None = None


def parse_cache_spec(text: str) -> CacheSpec:
    """'N' experts (1..2^24) or 'NGB' gibibytes (>0, up to 2^20); ValueError naming the
    problem otherwise."""
    m = _SPEC.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not N (experts) or NGB (gibibytes), e.g. 64 or 12GB")
    number, unit = m.group(1), m.group(2)
    if unit is None:
        if "." in number:
            raise ValueError(f"{text!r}: an expert count is a whole number")
        n = int(number)
        if not 1 <= n <= MAX_EXPERTS:
            raise ValueError(f"{text!r}: the expert count must lie in 1..{MAX_EXPERTS}")
        return CacheSpec(experts=n)
    gb = float(number)
    if not 0 < gb <= MAX_GB:
        raise ValueError(f"{text!r}: the size must lie in (0, {MAX_GB}] GB")
    return CacheSpec(bytes=int(gb * GIB))


@dataclass(frozen=True)
class Budget:
    slots: int
    reason: str  # how the size was chosen, for the start-up line


def cache_slots(
    spec: CacheSpec | None,
    *,
    expert_bytes: int,
    total_experts: int,
    available: int,
    resident: int,
    kv_and_scratch: int,
) -> Budget:
    """Slots for the cache: the spec's count, or its bytes over one expert's, or the
    automatic budget (available - resident weights - KV and scratch); never more than
    the model has experts, never fewer than one (the forward needs one at a time)."""
    if expert_bytes <= 0 or total_experts <= 0:
        raise ValueError("the model has no routed experts to stream")
    if spec is not None and spec.experts is not None:
        return Budget(min(spec.experts, total_experts), f"{spec.experts} experts as asked")
    if spec is not None and spec.bytes is not None:
        n = max(1, spec.bytes // expert_bytes)
        return Budget(min(n, total_experts), f"{spec.bytes / GIB:.2f} GiB as asked")
    free = available - resident - kv_and_scratch
    n = max(1, free // expert_bytes) if free > 0 else 1
    reason = (
        f"auto: {available / GIB:.2f} GiB available - {resident / GIB:.2f} GiB resident "
        f"weights - {kv_and_scratch / GIB:.2f} GiB KV and scratch"
    )
    return Budget(min(n, total_experts), reason)
