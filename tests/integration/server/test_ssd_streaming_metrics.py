"""A cpu server with --ssd-streaming reports its expert cache on /metrics."""

from __future__ import annotations

from pathlib import Path

import httpx
from tests.integration.server.live_server import live_server
from tests.integration.server.test_observability import CHAT, chat, scrape

from ds4.domain.expert_cache import CacheSpec, StreamingOptions

DEMO = Path(__file__).resolve().parents[3] / "models" / "demo.gguf"


def test_expert_cache_counters_grow_with_requests(tmp_path: Path) -> None:
    streaming = StreamingOptions(cache=CacheSpec(experts=3))
    with live_server(tmp_path, [], model=str(DEMO), backend="cpu", threads=1,
                     streaming=streaming) as live:  # fmt: skip
        before = scrape(live)
        reply = httpx.post(live.url + CHAT, json=chat("hello", max_tokens=4), timeout=120)
        assert reply.status_code == 200
        after = scrape(live)
    assert before["ds4_expert_cache_slots", ()] == 3
    assert after["ds4_expert_cache_misses", ()] > before["ds4_expert_cache_misses", ()]
    assert after["ds4_expert_cache_bytes_read", ()] > 0
    assert 0 <= after["ds4_expert_cache_hit_rate", ()] < 1
    assert after["ds4_expert_cache_stall_seconds", ()] > 0
