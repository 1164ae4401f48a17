"""The server's Prometheus metrics (docs/adr/0046-observability.md).

Every server has its own CollectorRegistry, never prometheus-client's global one, so
several servers in one process (the tests build many) each count only their own
requests. Request counts, tokens and cache hits are added when a request ends, from
its RequestRecord; the two histograms are fed as tokens are decoded; the gauges are
read when /metrics is scraped.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from ds4.adapters.http.request_record import RequestRecord
from ds4.domain.expert_cache import ExpertCacheStats

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4  # the text format every Prometheus reads

# Prefill of a long prompt on the CPU backend takes minutes, so the buckets reach far.
TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
INTER_TOKEN_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5)
MISS = "none"  # the cache decision's source when no cached state was chosen


class ServerMetrics:
    def __init__(
        self,
        *,
        queue_depth: Callable[[], int],
        active_sessions: Callable[[], int],
        kv_disk_bytes: Callable[[], int] | None = None,
        expert_cache: Callable[[], ExpertCacheStats] | None = None,
    ) -> None:
        self.registry = registry = CollectorRegistry()
        api = ("api",)
        self.requests = Counter(
            "ds4_requests", "HTTP requests by route and status", ("api", "status"),
            registry=registry,
        )  # fmt: skip
        self.prompt_tokens = Counter(
            "ds4_prompt_tokens", "prompt tokens of generation requests", api, registry=registry
        )
        self.cached_tokens = Counter(
            "ds4_prompt_cached_tokens",
            "prompt tokens reused from a cached state instead of evaluated",
            api,
            registry=registry,
        )
        self.generated_tokens = Counter(
            "ds4_generated_tokens", "tokens generated", api, registry=registry
        )
        self.cache_hits = Counter(
            "ds4_cache_hits",
            "prompts that continued from a cached state, by where it came from",
            ("source",),
            registry=registry,
        )
        self.cache_misses = Counter(
            "ds4_cache_misses",
            "prompts with no cached state chosen (only a common prefix the engine kept)",
            registry=registry,
        )
        self.ttft_seconds = Histogram(
            "ds4_time_to_first_token_seconds",
            "from a generation request's arrival to its first token",
            buckets=TTFT_BUCKETS,
            registry=registry,
        )
        self.inter_token_seconds = Histogram(
            "ds4_inter_token_seconds",
            "between consecutive generated tokens of one request",
            buckets=INTER_TOKEN_BUCKETS,
            registry=registry,
        )
        Gauge(
            "ds4_queue_depth", "generation jobs waiting for the engine", registry=registry
        ).set_function(queue_depth)
        Gauge(
            "ds4_active_sessions", "engine sessions running a job now", registry=registry
        ).set_function(active_sessions)
        if kv_disk_bytes is not None:
            Gauge(
                "ds4_kv_disk_bytes",
                "bytes of KV checkpoint files in --kv-disk-dir",
                registry=registry,
            ).set_function(kv_disk_bytes)
        if expert_cache is not None:
            _expert_cache_gauges(registry, expert_cache)

    # ---- TokenTiming: on the inference thread ---------------------------------------

    def first_token(self, seconds: float) -> None:
        self.ttft_seconds.observe(seconds)

    def inter_token(self, seconds: float) -> None:
        self.inter_token_seconds.observe(seconds)

    # ---- at the end of a request ------------------------------------------------------

    def request_done(self, record: RequestRecord) -> None:
        self.requests.labels(record.api, str(record.status)).inc()
        if record.prompt_tokens is not None:
            self.prompt_tokens.labels(record.api).inc(record.prompt_tokens)
        if record.cached_tokens is not None:
            self.cached_tokens.labels(record.api).inc(record.cached_tokens)
        if record.generated_tokens is not None:
            self.generated_tokens.labels(record.api).inc(record.generated_tokens)
        if record.cache_source == MISS:
            self.cache_misses.inc()
        elif record.cache_source is not None:
            self.cache_hits.labels(record.cache_source).inc()

    def exposition(self) -> bytes:
        """The text exposition of every metric (thread-safe; the gauges read now)."""
        return generate_latest(self.registry)


# --ssd-streaming's counters, read from the native cache at each scrape; gauges because
# prometheus-client counters cannot be fed from a function (they still only grow).
_EXPERT_CACHE_GAUGES = (
    ("slots", "expert cache budget in whole experts"),
    ("hits", "routed expert uses served from the cache"),
    ("misses", "routed expert uses read from disk"),
    ("hit_rate", "hits over routed expert uses since start"),
    ("bytes_read", "expert bytes read from the model file"),
    ("read_seconds", "time spent reading experts from the model file"),
    ("stall_seconds", "time the forward waited for missing experts"),
    ("readahead_loaded", "experts the read-ahead thread loaded"),
    ("readahead_used", "experts loaded ahead that were used before eviction"),
    ("prediction_precision", "read-ahead: predicted experts the layer then used / predicted"),
    ("prediction_recall", "read-ahead: experts a layer used that had been predicted / used"),
)


def _expert_cache_gauges(
    registry: CollectorRegistry, stats: Callable[[], ExpertCacheStats]
) -> None:
    for field, doc in _EXPERT_CACHE_GAUGES:

        def read(field: str = field) -> float:
            return float(getattr(stats(), field))

        Gauge(f"ds4_expert_cache_{field}", doc, registry=registry).set_function(read)
