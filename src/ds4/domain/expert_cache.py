"""SSD streaming's pure parts (docs/ssd-streaming.md): eviction policies replayed on
routing traces, the expert budget, what `--ssd-streaming` and its companion flags ask
for with the counters the cache reports, and the expert profile format.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# --- policy ---
# Eviction policies of the routed-expert cache, as pure replays of a routing trace.
#
# The native cache (native/cpu/expert_cache.c) implements the same two rules; these
# replays let a recorded trace be scored without I/O (docs/ssd-streaming.md):
#
# - lru: evict the least recently used resident expert.
# - decayed: every expert keeps a use count that halves every `half_life` accesses
#   (also while it is not resident); evict the resident expert with the lowest decayed
#   count, the least recently used among equals. Hot experts of every layer survive a
#   burst of one-off experts, which LRU lets flush them.

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


# --- budget ---
# The expert cache's budget: `--ssd-streaming-cache-experts N|NGB` read, and the
# automatic size from available memory (docs/ssd-streaming.md).

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


# --- options ---
# What `--ssd-streaming` and its companion flags ask for, and the counters the cache
# reports (docs/ssd-streaming.md).


@dataclass(frozen=True)
class StreamingOptions:
    cache: CacheSpec | None = None  # None: the automatic budget
    preload: int = 0  # hottest experts of the profile loaded at start
    cold: bool = False  # drop the file from the page cache first
    simulate_used_bytes: int = 0  # taken off available memory (budget experiments)
    profile: str | None = None  # read at start when it exists, written at close
    policy: str = "decayed"
    readahead: int = (
        0  # at most this many of the next layer's predicted experts loaded ahead (0: off)
    )
    direct: bool = True  # try O_DIRECT (False: pread + FADV_DONTNEED always)
    lock: bool = False  # mlock the non-routed weights and the expert cache
    half_life: float | None = None  # in expert uses; None: HALF_LIFE_TOKENS of decode
    # --ssd-streaming auto: the memory plan decides at load whether to stream at all
    # (domain/memory.py choose_streaming); the options then come back resolved
    auto: bool = False


# The decayed policy's memory: counts halve every this many tokens' worth of decode
# expert uses (n_layer * n_used each). Chosen on recorded demo-model traces, where it
# beat LRU at every budget from 10% to 75% (docs/ssd-streaming.md).
HALF_LIFE_TOKENS = 8


def half_life_uses(options: StreamingOptions, n_layer: int, n_used: int) -> float:
    if options.half_life is not None:
        return options.half_life
    return float(HALF_LIFE_TOKENS * n_layer * n_used)


@dataclass(frozen=True)
class ExpertCacheStats:
    slots: int
    resident: int
    accesses: int
    hits: int
    misses: int
    evictions: int
    bytes_read: int
    read_seconds: float
    stall_seconds: float
    readahead_loaded: int = 0  # experts the read-ahead thread loaded
    readahead_used: int = 0  # ... and that were used before being evicted
    predicted: int = 0  # experts the next layer's router predicted (distinct per layer)
    predicted_layer_used: int = 0  # distinct experts those layers then used
    predicted_correct: int = 0  # ... that had been predicted

    @property
    def hit_rate(self) -> float:
        return self.hits / self.accesses if self.accesses else 0.0

    @property
    def prediction_precision(self) -> float:
        return self.predicted_correct / self.predicted if self.predicted else 0.0

    @property
    def prediction_recall(self) -> float:
        used = self.predicted_layer_used
        return self.predicted_correct / used if used else 0.0

    @property
    def read_bytes_per_second(self) -> float:
        return self.bytes_read / self.read_seconds if self.read_seconds > 0 else 0.0

    def since(self, before: ExpertCacheStats) -> ExpertCacheStats:
        """The counters accumulated after `before` (slots, resident as now)."""
        return ExpertCacheStats(
            self.slots, self.resident, self.accesses - before.accesses,
            self.hits - before.hits, self.misses - before.misses,
            self.evictions - before.evictions, self.bytes_read - before.bytes_read,
            self.read_seconds - before.read_seconds, self.stall_seconds - before.stall_seconds,
            self.readahead_loaded - before.readahead_loaded,
            self.readahead_used - before.readahead_used, self.predicted - before.predicted,
            self.predicted_layer_used - before.predicted_layer_used,
            self.predicted_correct - before.predicted_correct,
        )  # fmt: skip


# --- profile ---
# The expert profile (`--expert-profile FILE`): per (layer, expert) use counts a run
# wrote, read back to preload the hottest experts. JSON, so it can be inspected:
# {"format": "ds4-expert-profile", "version": 1, "n_layer": L, "n_expert": E,
#  "counts": [[...E counts...] x L]}.

FORMAT = "ds4-expert-profile"
VERSION = 1


def profile_text(n_layer: int, n_expert: int, counts: Sequence[int]) -> str:
    if len(counts) != n_layer * n_expert:
        raise ValueError("counts must have n_layer * n_expert values")
    rows = [list(counts[i * n_expert : (i + 1) * n_expert]) for i in range(n_layer)]
    doc = {"format": FORMAT, "version": VERSION, "n_layer": n_layer, "n_expert": n_expert}
    return json.dumps({**doc, "counts": rows}) + "\n"


def parse_profile(text: str, n_layer: int, n_expert: int) -> list[int]:
    """Flat counts (layer-major); ValueError naming what does not fit this model."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} file")
    if doc.get("version") != VERSION:
        raise ValueError(f"version {doc.get('version')!r}, this build reads {VERSION}")
    if doc.get("n_layer") != n_layer or doc.get("n_expert") != n_expert:
        raise ValueError(
            f"written for {doc.get('n_layer')} layers x {doc.get('n_expert')} experts, "
            f"this model has {n_layer} x {n_expert}"
        )
    rows = doc.get("counts")
    if not isinstance(rows, list) or len(rows) != n_layer:
        raise ValueError(f"counts must be {n_layer} lists")
    flat: list[int] = []
    for il, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != n_expert:
            raise ValueError(f"counts[{il}] must have {n_expert} values")
        for v in row:
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"counts[{il}] holds {v!r}, not a count >= 0")
            flat.append(v)
    return flat


def merged(a: Sequence[int], b: Sequence[int]) -> list[int]:
    return [x + y for x, y in zip(a, b, strict=True)]


def hottest(counts: Sequence[int], n_expert: int, limit: int) -> list[tuple[int, int]]:
    """Up to `limit` (layer, expert) pairs with the highest counts (ties: lower layer,
    then lower expert first); never-used experts are not picked."""
    order = sorted((i for i, c in enumerate(counts) if c > 0), key=lambda i: (-counts[i], i))
    return [(i // n_expert, i % n_expert) for i in order[:limit]]
