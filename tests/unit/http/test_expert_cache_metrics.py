"""/metrics carries the SSD-streaming expert cache's counters when the runner has one."""

from __future__ import annotations

from ds4.adapters.http.metrics import ServerMetrics
from ds4.domain.expert_cache import ExpertCacheStats


def _metrics(stats: ExpertCacheStats | None) -> str:
    def read() -> ExpertCacheStats:
        assert stats is not None
        return stats

    m = ServerMetrics(
        queue_depth=lambda: 0,
        active_sessions=lambda: 0,
        expert_cache=read if stats is not None else None,
    )
    return m.exposition().decode()


def test_expert_cache_gauges_read_the_counters_at_scrape() -> None:
    stats = ExpertCacheStats(slots=12, resident=12, accesses=40, hits=30, misses=10,
                             evictions=2, bytes_read=5_000_000, read_seconds=0.5,
                             stall_seconds=0.25)  # fmt: skip
    text = _metrics(stats)
    assert "ds4_expert_cache_slots 12.0" in text
    assert "ds4_expert_cache_hits 30.0" in text
    assert "ds4_expert_cache_misses 10.0" in text
    assert "ds4_expert_cache_hit_rate 0.75" in text
    assert "ds4_expert_cache_bytes_read 5e+06" in text
    assert "ds4_expert_cache_stall_seconds 0.25" in text
    assert "ds4_expert_cache_prediction_precision 0.0" in text  # read-ahead off


def test_read_ahead_counters_and_prediction_quality() -> None:
    stats = ExpertCacheStats(slots=12, resident=12, accesses=40, hits=30, misses=10,
                             evictions=2, bytes_read=5_000_000, read_seconds=0.5,
                             stall_seconds=0.25, readahead_loaded=8, readahead_used=6,
                             predicted=20, predicted_layer_used=16,
                             predicted_correct=12)  # fmt: skip
    text = _metrics(stats)
    assert "ds4_expert_cache_readahead_loaded 8.0" in text
    assert "ds4_expert_cache_readahead_used 6.0" in text
    assert "ds4_expert_cache_prediction_precision 0.6" in text
    assert "ds4_expert_cache_prediction_recall 0.75" in text


def test_no_expert_cache_no_gauges() -> None:
    assert "ds4_expert_cache" not in _metrics(None)
