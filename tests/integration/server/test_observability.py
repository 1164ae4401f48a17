"""Issue 16 item 3: the access line of each request and /metrics, on a live server
(scripted backend, real uvicorn), scraped and parsed with prometheus-client's parser.
The log formats and the absence of repeated lines are checked on a `ds4 server`
subprocess (test_server_log_output.py)."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.integration.server.live_server import LiveServer, live_server, wait_until_queued

from ds4.domain.kvcache.policy import KvCacheOptions

CHAT = "/v1/chat/completions"
LONG = "word " * 150  # 1.5 s at 10 ms per token


def chat(text: str, **extra: object) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text}], **extra}


def access_lines(caplog: pytest.LogCaptureFixture, n: int) -> list[dict[str, object]]:
    """The first `n` access lines' fields, waiting for them: a line is written once the
    request's response is complete, which the client may see first."""
    deadline = time.monotonic() + 30
    while True:
        lines = [r.fields for r in caplog.records if r.name == "ds4.access"]  # type: ignore[attr-defined]
        if len(lines) >= n or time.monotonic() > deadline:
            assert len(lines) == n, lines
            return lines
        time.sleep(0.01)


def scrape(
    live: LiveServer, **headers: str
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics: (name, sorted labels) -> value."""
    response = httpx.get(live.url + "/metrics", headers=headers, timeout=30)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


@pytest.fixture(autouse=True)
def access_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ds4.access")


def test_a_chat_completion_gets_one_line_with_its_tokens_and_times(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with live_server(tmp_path, ["</think>Hello there."]) as live:
        reply = httpx.post(live.url + CHAT, json=chat("hi"), timeout=30).json()
        (line,) = access_lines(caplog, 1)
    usage = reply["usage"]
    assert line["method"] == "POST" and line["path"] == CHAT and line["api"] == "chat"
    assert line["status"] == 200 and line["finish"] == "stop"
    assert line["prompt_tokens"] == usage["prompt_tokens"]
    assert line["cached_tokens"] == usage["prompt_tokens_details"]["cached_tokens"] == 0
    assert line["generated_tokens"] == usage["completion_tokens"] > 1
    assert line["cache_source"] == "none"  # a fresh server: nothing to continue
    assert 0 < line["ttft_s"] <= line["duration_s"]  # type: ignore[operator]
    assert line["tokens_per_s"] > 0  # type: ignore[operator]
    assert str(line["client"]).startswith("127.0.0.1:")


def test_a_stream_a_refusal_and_a_walk_away_each_get_their_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = ["</think>first answer", "</think>" + LONG, "</think>after"]
    with live_server(tmp_path, script, script_token_delay=0.01) as live:
        body = chat("hi", stream=True, stream_options={"include_usage": True})
        with httpx.stream("POST", live.url + CHAT, json=body) as stream:
            assert stream.status_code == 200
            frames = [line for line in stream.iter_lines() if line.startswith("data: {")]
        usage = json.loads(frames[-1].removeprefix("data: "))["usage"]
        assert httpx.post(live.url + CHAT, content=b"{bad", timeout=30).status_code == 400
        body = chat("long please", stream=True)
        with httpx.stream("POST", live.url + CHAT, json=body, timeout=30) as stream:
            for line in stream.iter_lines():
                if '"content"' in line:
                    break  # the long answer is streaming: walk away mid-generation
        streamed, refused, cancelled = access_lines(caplog, 3)
    assert streamed["status"] == 200 and streamed["finish"] == "stop"
    assert streamed["prompt_tokens"] == usage["prompt_tokens"]
    assert streamed["generated_tokens"] == usage["completion_tokens"] > 0
    assert streamed["ttft_s"] is not None and streamed["tokens_per_s"] is not None
    assert refused["status"] == 400 and refused["api"] == "chat"
    assert refused["prompt_tokens"] is None and refused["finish"] is None
    assert cancelled["status"] == 200 and cancelled["finish"] == "cancelled"  # the head went out
    assert 0 < cancelled["generated_tokens"] < len(LONG.split())  # type: ignore[operator]


def test_metrics_count_requests_tokens_and_token_times(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with live_server(tmp_path, ["</think>one two three", "</think>four five"]) as live:
        usages = [
            httpx.post(live.url + CHAT, json=chat(text), timeout=30).json()["usage"]
            for text in ("hi", "there")
        ]
        httpx.post(live.url + CHAT, content=b"{bad", timeout=30)
        httpx.get(live.url + "/v1/nope")
        access_lines(caplog, 4)
        m = scrape(live)
    assert m["ds4_requests_total", (("api", "chat"), ("status", "200"))] == 2
    assert m["ds4_requests_total", (("api", "chat"), ("status", "400"))] == 1
    assert m["ds4_requests_total", (("api", "other"), ("status", "404"))] == 1
    chat_label = (("api", "chat"),)
    assert m["ds4_prompt_tokens_total", chat_label] == sum(u["prompt_tokens"] for u in usages)
    generated = [u["completion_tokens"] for u in usages]
    assert m["ds4_generated_tokens_total", chat_label] == sum(generated)
    assert m["ds4_prompt_cached_tokens_total", chat_label] == sum(
        u["prompt_tokens_details"]["cached_tokens"] for u in usages
    )
    assert m["ds4_time_to_first_token_seconds_count", ()] == 2
    assert m["ds4_time_to_first_token_seconds_bucket", (("le", "+Inf"),)] == 2
    assert m["ds4_inter_token_seconds_count", ()] == sum(n - 1 for n in generated)
    assert m["ds4_cache_misses_total", ()] == 2
    assert m["ds4_queue_depth", ()] == 0 and m["ds4_active_sessions", ()] == 0
    assert ("ds4_kv_disk_bytes", ()) not in m  # no --kv-disk-dir


def test_metrics_count_disk_cache_hits_by_source_and_the_files_bytes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kv = tmp_path / "kv"
    kv.mkdir()
    opts = KvCacheOptions(min_tokens=4, boundary_align_tokens=0, boundary_trim_tokens=0)
    outputs = ["</think>one", "</think>two", "</think>three"]
    with live_server(tmp_path, outputs, kv_disk_dir=str(kv), kv_cache=opts) as live:
        for text in ("first conversation", "another one", "first conversation"):
            httpx.post(live.url + CHAT, json=chat(text), timeout=30)
        lines = access_lines(caplog, 3)
        m = scrape(live)
        on_disk = sum(p.stat().st_size for p in kv.glob("*.kv"))  # before the shutdown save
    assert [line["cache_source"] for line in lines] == ["none", "none", "disk-text"]
    assert m["ds4_cache_hits_total", (("source", "disk-text"),)] == 1
    assert m["ds4_cache_misses_total", ()] == 2
    assert m["ds4_kv_disk_bytes", ()] == on_disk > 0


def test_queue_depth_and_active_sessions_while_a_job_runs(tmp_path: Path) -> None:
    with live_server(
        tmp_path, ["</think>" + LONG, "</think>next"], script_token_delay=0.01
    ) as live:
        inference = live.built.state.inference
        first = threading.Thread(
            target=httpx.post, args=(live.url + CHAT,), kwargs={"json": chat("a"), "timeout": 60}
        )
        first.start()
        deadline = time.monotonic() + 30
        while inference.running == 0:  # the worker has taken the first job
            assert time.monotonic() < deadline
            time.sleep(0.005)
        second = threading.Thread(
            target=httpx.post, args=(live.url + CHAT,), kwargs={"json": chat("b"), "timeout": 60}
        )
        second.start()
        wait_until_queued(inference, 2)
        m = scrape(live)
        first.join()
        second.join()
    assert m["ds4_active_sessions", ()] == 1 and m["ds4_queue_depth", ()] == 1


def test_metrics_need_the_api_key_when_one_is_set(tmp_path: Path) -> None:
    with live_server(tmp_path, ["</think>ok"], api_key="sekrit") as live:
        assert httpx.get(live.url + "/metrics").status_code == 401
        assert scrape(live, authorization="Bearer sekrit")[("ds4_queue_depth", ())] == 0
