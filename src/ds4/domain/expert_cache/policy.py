"""Eviction policies of the routed-expert cache, as pure replays of a routing trace.

The native cache (native/cpu/expert_cache.c) implements the same two rules; these
replays let a recorded trace be scored without I/O (docs/ssd-streaming.md):

- lru: evict the least recently used resident expert.
- decayed: every expert keeps a use count that halves every `half_life` accesses
  (also while it is not resident); evict the resident expert with the lowest decayed
  count, the least recently used among equals. Hot experts of every layer survive a
  burst of one-off experts, which LRU lets flush them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

POLICIES = ("lru", "decayed")
DEFAULT_HALF_LIFE = 4096.0


@dataclass(frozen=True)
class Replay:
    accesses: int
    hits: int

    @property
    def hit_rate(self) -> float:
        return self.hits / self.accesses if self.accesses else 0.0


class ExpertCacheModel:
    """The cache's bookkeeping without the bytes: which keys are resident."""

    def __init__(self, slots: int, policy: str = "decayed", half_life: float = DEFAULT_HALF_LIFE):
        if slots < 1:
            raise ValueError("an expert cache needs at least one slot")
        if policy not in POLICIES:
            raise ValueError(f"unknown eviction policy {policy!r} (have: {', '.join(POLICIES)})")
        if not half_life > 0:
            raise ValueError("half_life must be positive")
        self.slots, self.policy, self.half_life = slots, policy, half_life
        self.tick = 0
        self.resident: list[int] = []  # slot order, as the native cache scans them
        self._score: dict[int, float] = {}
        self._last: dict[int, int] = {}

    def _decayed(self, key: int) -> float:
        score = self._score.get(key, 0.0)
        return score * math.pow(2.0, -(self.tick - self._last.get(key, 0)) / self.half_life)

    def victim(self) -> int:
        """The resident key the policy evicts next (the cache must be full)."""
        best = self.resident[0]
        for key in self.resident[1:]:
            if self.policy == "lru":
                if self._last[key] < self._last[best]:
                    best = key
                continue
            s, b = self._decayed(key), self._decayed(best)
            if s < b or (s == b and self._last[key] < self._last[best]):
                best = key
        return best

    def access(self, key: int) -> bool:
        """Use `key`; True on a hit. A miss loads it, evicting the victim when full."""
        self.tick += 1
        hit = key in self.resident
        if not hit:
            if len(self.resident) >= self.slots:
                out = self.victim()
                self.resident[self.resident.index(out)] = key
            else:
                self.resident.append(key)
        self._score[key] = self._decayed(key) + 1.0
        self._last[key] = self.tick
        return hit


def replay(
    trace: Iterable[int], slots: int, policy: str, half_life: float = DEFAULT_HALF_LIFE
) -> Replay:
    """Hits of `policy` with `slots` slots over the trace of expert keys."""
    cache = ExpertCacheModel(slots, policy, half_life)
    accesses = hits = 0
    for key in trace:
        accesses += 1
        hits += cache.access(key)
    return Replay(accesses, hits)


def optimal_hits(trace: list[int], slots: int) -> Replay:
    """Belady's bound: evict the resident key used furthest in the future (no policy
    that does not see the future can do better; the replays' yardstick)."""
    nxt: list[int] = [0] * len(trace)
    seen: dict[int, int] = {}
    for i in range(len(trace) - 1, -1, -1):
        nxt[i] = seen.get(trace[i], len(trace))
        seen[trace[i]] = i
    resident: dict[int, int] = {}  # key -> its next use
    hits = 0
    for i, key in enumerate(trace):
        if key in resident:
            hits += 1
        elif len(resident) >= slots:
            del resident[max(resident, key=lambda k: resident[k])]
        resident[key] = nxt[i]
    return Replay(len(trace), hits)
