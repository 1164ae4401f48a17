"""What `--ssd-streaming` and its companion flags ask for, and the counters the cache
reports (docs/ssd-streaming.md)."""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.expert_cache.budget import CacheSpec


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
