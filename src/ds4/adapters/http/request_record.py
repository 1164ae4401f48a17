"""What one HTTP request did, gathered while it runs, for its access-log line and for
/metrics (docs/adr/0046-observability.md).

The access middleware (access_log.py) makes one record per request and puts it in the
ASGI scope; a generation route (post_route) hands it the job's outputs and the job's
per-token callback, both called on the inference thread. Times are seconds of a
monotonic clock passed in (the domain never reads a clock):

- time to first token: from the request's arrival to the evaluation of the first
  generated token, so it covers reading, tokenizing, queueing and prefill;
- tokens per second: generated tokens over the time from the prompt being ready to
  the last token's evaluation (each token's sampling and evaluation, nothing else);
- every later token reports its gap to the one before (the inter-token histogram).

The record is read once the job's last output has crossed to the event loop: the
queue between them orders the inference thread's writes before those reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ds4.adapters.http.inference_worker import JobFailed, JobOutput
from ds4.domain.generation.events import Finished
from ds4.domain.serving.exchange import PromptReady

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
