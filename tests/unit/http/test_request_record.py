"""RequestRecord: the numbers of one request's access line, from the job's outputs and
token callback, on a clock the test moves."""

from __future__ import annotations

from ds4.adapters.http.access_log import route_label
from ds4.adapters.http.inference_worker import JobFailed
from ds4.adapters.http.metrics import RequestRecord
from ds4.domain.generation.events import Finished, TextDelta, Usage
from ds4.domain.serving.exchange import PromptReady


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Timing:
    def __init__(self) -> None:
        self.first: list[float] = []
        self.gaps: list[float] = []

    def first_token(self, seconds: float) -> None:
        self.first.append(seconds)

    def inter_token(self, seconds: float) -> None:
        self.gaps.append(seconds)


def test_a_generation_reports_its_tokens_source_and_times() -> None:
    clock, timing = Clock(), Timing()
    record = RequestRecord("POST", "/v1/chat/completions", "chat", clock(), clock=clock,
                           timing=timing)  # fmt: skip
    clock.now = 100.5  # read, tokenized, queued, prefilled
    record.observe(PromptReady(40, 30, "memory-token"))
    for at in (101.0, 101.25, 101.5, 102.0):
        clock.now = at
        record.on_token(7)
        record.observe(TextDelta("x"))
    record.observe(Finished("stop", "xxxx", None, (), Usage(40, 30, 4)))
    assert timing.first == [1.0] and timing.gaps == [0.25, 0.25, 0.5]
    assert record.ttft == 1.0
    assert record.tokens_per_second == 4 / 1.5  # from the prompt being ready
    fields = record.fields(2.5)
    assert fields == {
        "method": "POST",
        "path": "/v1/chat/completions",
        "api": "chat",
        "status": None,  # set by the middleware from the response head
        "prompt_tokens": 40,
        "cached_tokens": 30,
        "generated_tokens": 4,
        "ttft_s": 1.0,
        "tokens_per_s": 2.67,
        "finish": "stop",
        "cache_source": "memory-token",
        "duration_s": 2.5,
        "client": None,
    }


def test_a_job_cancelled_in_the_queue_has_no_token_times() -> None:
    record = RequestRecord("POST", "/v1/messages", "anthropic", 0.0, clock=Clock())
    record.observe(Finished("cancelled", "", None, (), Usage(12, 0, 0)))
    assert (record.prompt_tokens, record.generated_tokens, record.finish) == (12, 0, "cancelled")
    assert record.ttft is None and record.tokens_per_second is None
    assert record.cache_source is None  # it never reached the cache decision


def test_a_refused_job_finishes_as_an_error() -> None:
    record = RequestRecord("POST", "/v1/responses", "responses", 0.0, clock=Clock())
    record.observe(JobFailed("state gone"))
    assert record.finish == "error" and record.generated_tokens is None


LABELS = {"/v1/chat/completions": "chat", "/v1/models": "models", "/v1/models/": "models"}


def test_route_labels_never_carry_an_unknown_path() -> None:
    assert route_label("/v1/chat/completions", LABELS) == "chat"
    assert route_label("/v1/chat/completions/", LABELS) == "chat"
    assert route_label("/v1/models/deepseek-v4-flash", LABELS) == "models"
    assert route_label("/v1/models", LABELS) == "models"
    assert route_label("/v1/chat/completions/x", LABELS) == "other"
    assert route_label("/../etc/passwd", LABELS) == "other"
