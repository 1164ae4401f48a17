"""The server's Prometheus metrics (docs/adr/0046-observability.md), the per-request
record they and the access log are fed from, and the GET /metrics route.

Every server has its own CollectorRegistry, never prometheus-client's global one, so
several servers in one process (the tests build many) each count only their own
requests. Request counts, tokens and cache hits are added when a request ends, from
its RequestRecord; the two histograms are fed as tokens are decoded; the gauges are
read when /metrics is scraped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from litestar import Response, get
from litestar.handlers import HTTPRouteHandler
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from ds4.adapters.http.inference_worker import JobFailed, JobOutput
from ds4.domain.dist_transport import HopRecord
from ds4.domain.expert_cache import ExpertCacheStats
from ds4.domain.generation.events import Finished
from ds4.domain.serving.exchange import PromptReady

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4  # the text format every Prometheus reads

# Prefill of a long prompt on the CPU backend takes minutes, so the buckets reach far.
TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
INTER_TOKEN_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5)
# --distributed's hops: a demo-model hop takes tens of microseconds, a Flash prefill
# piece seconds; bytes from one demo token (528 B at 8 bits) to a 16 MiB Flash piece
HOP_SECONDS_BUCKETS = (1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1,
                       0.25, 0.5, 1, 2.5, 5, 10, 30)  # fmt: skip
HOP_BYTES_BUCKETS = tuple(float(4**k) for k in range(4, 16))  # 256 B .. 256 MiB
HopFeed = Callable[[Callable[[HopRecord], None]], None]
MISS = "none"  # the cache decision's source when no cached state was chosen


class ServerMetrics:
    def __init__(
        self,
        *,
        queue_depth: Callable[[], int],
        active_sessions: Callable[[], int],
        kv_disk_bytes: Callable[[], int] | None = None,
        expert_cache: Callable[[], ExpertCacheStats] | None = None,
        hops: HopFeed | None = None,
    ) -> None:
        """hops: subscribes a callback to every hop record of a --distributed runner
        (its passes through the layer ranges), for the ds4_dist_* histograms."""
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
        if hops is not None:
            self._hop_histograms(registry)
            hops(self.hop)

    # ---- --distributed: one observation per hop of every pass -----------------------

    def _hop_histograms(self, registry: CollectorRegistry) -> None:
        labels = ("to", "op")
        seconds = HOP_SECONDS_BUCKETS
        self.hop_eval = Histogram(
            "ds4_dist_eval_seconds", "a layer range's forward per pass (decode, layers, encode)",
            labels, buckets=seconds, registry=registry,
        )  # fmt: skip
        self.hop_wait = Histogram(
            "ds4_dist_wait_seconds",
            "from a hop's end to its pass being done at the coordinator (downstream wait)",
            labels, buckets=seconds, registry=registry,
        )  # fmt: skip
        self.hop_transfer = Histogram(
            "ds4_dist_transfer_seconds",
            "from a hop's input being ready and its worker free to its start",
            labels, buckets=seconds, registry=registry,
        )  # fmt: skip
        self.hop_bytes = Histogram(
            "ds4_dist_hop_bytes",
            "hidden-state payload bytes per hop, received (in) and sent (out)",
            (*labels, "direction"), buckets=HOP_BYTES_BUCKETS, registry=registry,
        )  # fmt: skip

    def hop(self, record: HopRecord) -> None:
        to = record.to.removeprefix("layers ")
        self.hop_eval.labels(to, record.op).observe(record.eval_s)
        self.hop_wait.labels(to, record.op).observe(record.wait_s)
        self.hop_transfer.labels(to, record.op).observe(record.transfer_s)
        self.hop_bytes.labels(to, record.op, "in").observe(record.bytes_in)
        if record.bytes_out:
            self.hop_bytes.labels(to, record.op, "out").observe(record.bytes_out)

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


# ---- the request record ----------------------------------------------------
# What one HTTP request did, gathered while it runs, for its access-log line and for
# /metrics (docs/adr/0046-observability.md).
#
# The access middleware (access_log.py) makes one record per request and puts it in the
# ASGI scope; a generation route (app.handle_post) hands it the job's outputs and the job's
# per-token callback, both called on the inference thread. Times are seconds of a
# monotonic clock passed in (the domain never reads a clock):
#
# - time to first token: from the request's arrival to the evaluation of the first
#   generated token, so it covers reading, tokenizing, queueing and prefill;
# - tokens per second: generated tokens over the time from the prompt being ready to
#   the last token's evaluation (each token's sampling and evaluation, nothing else);
# - every later token reports its gap to the one before (the inter-token histogram).
#
# The record is read once the job's last output has crossed to the event loop: the
# queue between them orders the inference thread's writes before those reads.

# The status logged when the client left before any response was sent (nginx's 499).
CLIENT_GONE = 499


class TokenTiming(Protocol):
    """Where token times go as they happen (ServerMetrics' histograms)."""

    def first_token(self, seconds: float) -> None: ...

    def inter_token(self, seconds: float) -> None: ...


@dataclass
class RequestRecord:
    method: str
    path: str
    api: str  # the route's label: an Api value, count_tokens, models, health, metrics, other
    started: float  # clock() when the request arrived
    client: str | None = None  # host:port
    clock: Callable[[], float] = time.monotonic
    timing: TokenTiming | None = None
    status: int | None = None  # of the response head sent
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    generated_tokens: int | None = None
    cache_source: str | None = None
    finish: str | None = None
    prompt_ready_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    tokens: int = 0  # decoded tokens seen by on_token

    def observe(self, output: JobOutput) -> None:
        """One job output, on the inference thread, as it is delivered."""
        if isinstance(output, PromptReady):
            self.prompt_ready_at = self.clock()
            self.prompt_tokens = output.prompt_tokens
            self.cached_tokens = output.cached_tokens
            self.cache_source = output.source
        elif isinstance(output, Finished):
            usage = output.usage
            self.prompt_tokens = usage.prompt_tokens
            self.cached_tokens = usage.cached_tokens
            self.generated_tokens = usage.completion_tokens
            self.finish = output.finish
        elif isinstance(output, JobFailed):
            self.finish = "error"  # no generation (refused, or the prefill failed)

    def on_token(self, _token: int) -> None:
        """The job's per-token callback: after each decoded token's evaluation."""
        now = self.clock()
        if self.last_token_at is None:
            self.first_token_at = now
            if self.timing is not None:
                self.timing.first_token(now - self.started)
        elif self.timing is not None:
            self.timing.inter_token(now - self.last_token_at)
        self.last_token_at = now
        self.tokens += 1

    @property
    def ttft(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.started

    @property
    def tokens_per_second(self) -> float | None:
        if self.prompt_ready_at is None or self.last_token_at is None:
            return None
        span = self.last_token_at - self.prompt_ready_at
        return self.tokens / span if span > 0 else None

    def fields(self, duration: float) -> dict[str, object]:
        """The access line's fields, always the same names; None where they do not
        apply (token fields outside the generation routes)."""
        ttft, rate = self.ttft, self.tokens_per_second
        return {
            "method": self.method,
            "path": self.path,
            "api": self.api,
            "status": self.status,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "generated_tokens": self.generated_tokens,
            "ttft_s": None if ttft is None else round(ttft, 4),
            "tokens_per_s": None if rate is None else round(rate, 2),
            "finish": self.finish,
            "cache_source": self.cache_source,
            "duration_s": round(duration, 4),
            "client": self.client,
        }


def detached_record(method: str, path: str) -> RequestRecord:
    """A record nobody logs: for a route called without the access middleware."""
    return RequestRecord(method, path, "other", time.monotonic())


# ---- GET /metrics ----------------------------------------------------------
# GET /metrics: the Prometheus text exposition (docs/adr/0046-observability.md).
#
# It sits behind the guard like every route but /health: open without --api-key, and
# with one it needs the key (Prometheus sends it with `authorization` or
# `bearer_token` in its scrape config). Rendering runs on a pool thread, because the
# KV disk gauge lists the cache directory.

METRICS_PATH = "/metrics"


def metrics_route(metrics: ServerMetrics) -> HTTPRouteHandler:
    @get(METRICS_PATH, sync_to_thread=True)
    def scrape() -> Response[bytes]:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    return scrape
