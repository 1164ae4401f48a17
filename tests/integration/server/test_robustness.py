"""Bad input answered 4xx in each endpoint's own shape while the server keeps serving;
API key; context length; disconnect cancellation; FIFO queueing."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.integration.server.live_server import LiveServer, live_server, wait_until_queued

LONG = "word " * 150  # ~150 tokens: 1.5 s at the scripted 10 ms per token


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(
        tmp_path_factory.mktemp("srv"), ["</think>ok"], ctx=512, api_key="sekrit"
    ) as live:
        yield live


AUTH = {"Authorization": "Bearer sekrit"}
CHAT = "/v1/chat/completions"
GOOD = {"messages": [{"role": "user", "content": "hi"}]}


def post(
    server: LiveServer, path: str, body: bytes, headers: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.post(
        server.url + path, content=body, headers={**AUTH, **(headers or {})}, timeout=30
    )


@pytest.mark.parametrize(
    "body",
    [
        b'{"messages": NaN}',
        b'{"messages": [{"role": "user", "content": Infinity}]}',
        b"[" * 300 + b"]" * 300,
        b'{"messages": [{"role": "user", "content": "\\ud800"}]}',
        b'{"messages": [{"role": "user", "content": "a", "content": "b"}]}',
        b'{"messages": "not a list"}',
        b'{"messages": [], "stream": "yes"}',
        b'{"messages": [], "max_tokens": "ten"}',
        b"not json at all",
        b'{"messages": [], "reasoning_effort": "banana"}',
    ],
)
def test_malformed_chat_bodies_are_openai_400s(server: LiveServer, body: bytes) -> None:
    response = post(server, CHAT, body)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_malformed_anthropic_body_is_anthropic_shaped(server: LiveServer) -> None:
    response = post(server, "/v1/messages", b'{"messages": NaN}')
    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"


def test_missing_fields_and_responses_policy(server: LiveServer) -> None:
    assert post(server, CHAT, b"{}").json()["error"]["message"] == "missing messages"
    assert post(server, "/v1/completions", b"{}").json()["error"]["message"] == "missing prompt"
    assert post(server, "/v1/responses", b"{}").json()["error"]["message"] == "missing input"
    forced = post(server, "/v1/responses", b'{"input": "x", "tool_choice": "required"}')
    # a forced call with no tools to call is refused, naming the field
    assert forced.status_code == 400
    assert forced.json()["error"]["message"].startswith("tool_choice:")
    malformed = post(server, "/v1/responses", b'{"input": "x", "previous_response_id": "r"}')
    assert malformed.status_code == 400
    assert malformed.json()["error"]["param"] == "previous_response_id"
    chained = post(server, "/v1/responses", b'{"input": "x", "previous_response_id": "resp_0"}')
    assert chained.status_code == 404  # no stored response by that id
    assert chained.json()["error"]["message"] == "Response with id 'resp_0' not found."


def test_huge_body_is_413(server: LiveServer) -> None:
    big = b'{"messages": "' + b"x" * (64 * 1024 * 1024 + 10) + b'"}'
    response = post(server, CHAT, big)
    assert response.status_code == 413


def test_api_key_required_in_endpoint_shape(server: LiveServer) -> None:
    openai_shape = httpx.post(server.url + CHAT, json=GOOD)
    assert openai_shape.status_code == 401 and "error" in openai_shape.json()
    anthropic_shape = httpx.post(server.url + "/v1/messages?beta=true", json=GOOD)
    assert anthropic_shape.status_code == 401
    assert anthropic_shape.json()["error"]["type"] == "authentication_error"
    with_x_key = httpx.post(
        server.url + "/v1/messages?beta=true",
        json={**GOOD, "max_tokens": 10},
        headers={"x-api-key": "sekrit", "anthropic-version": "2023-06-01", "anthropic-beta": "x"},
        timeout=30,
    )
    assert with_x_key.status_code == 200
    assert httpx.get(server.url + "/health").status_code == 200  # no key needed


def test_context_length_exceeded_shapes(server: LiveServer) -> None:
    huge = json.dumps({"messages": [{"role": "user", "content": "hello " * 600}]}).encode()
    error = post(server, CHAT, huge).json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert error["n_ctx"] == 512 and error["n_prompt_tokens"] >= 512
    body = json.dumps({"max_tokens": 5, "messages": [{"role": "user", "content": "hello " * 600}]})
    anthropic = post(server, "/v1/messages", body.encode()).json()
    assert anthropic["type"] == "error" and anthropic["error"]["n_ctx"] == 512


def test_unknown_route_and_model(server: LiveServer) -> None:
    assert httpx.get(server.url + "/v1/nope", headers=AUTH).status_code == 404
    assert httpx.get(server.url + "/v1/models/other", headers=AUTH).status_code == 404
    assert httpx.get(server.url + "/v1/models/deepseek-v4-flash", headers=AUTH).status_code == 200


def test_foreign_host_header_refused(server: LiveServer) -> None:
    response = httpx.get(server.url + "/health", headers={"Host": "evil.example"})
    assert response.status_code == 403


def test_server_still_serves_after_bad_input(server: LiveServer) -> None:
    response = post(server, CHAT, json.dumps(GOOD).encode())
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "ok"


def test_disconnect_cancels_the_job_mid_generation(tmp_path: Path) -> None:
    trace_path = tmp_path / "trace.txt"
    with (
        trace_path.open("w", encoding="utf-8") as trace,
        live_server(
            tmp_path, ["</think>" + LONG, "</think>second"], trace, script_token_delay=0.01
        ) as live,
    ):
        body = {"messages": [{"role": "user", "content": "long please"}], "stream": True}
        with httpx.stream("POST", live.url + CHAT, json=body, timeout=30) as response:
            for line in response.iter_lines():
                if '"content"' in line:
                    break  # the long answer is streaming: walk away mid-generation
        follow = httpx.post(live.url + CHAT, json=GOOD, timeout=30)
        assert follow.json()["choices"][0]["message"]["content"] == "second"
    parsed = [line for line in trace_path.read_text().splitlines() if "parsed message" in line]
    assert "finish=cancelled" in parsed[0]
    generated = int(parsed[0].split("tokens=")[1].split()[0])
    assert generated < len(LONG.split())  # stopped well before the scripted end


def test_concurrent_requests_are_served_in_arrival_order(tmp_path: Path) -> None:
    outputs = ["</think>" + LONG, "</think>second", "</think>third"]
    with live_server(tmp_path, outputs, script_token_delay=0.01) as live:
        contents: dict[int, str] = {}

        def ask(i: int) -> None:
            response = httpx.post(live.url + CHAT, json=GOOD, timeout=60)
            contents[i] = response.json()["choices"][0]["message"]["content"]

        inference = live.built.state.inference
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
        for queued, thread in enumerate(threads, start=1):
            thread.start()
            wait_until_queued(inference, queued)  # queued before the next one starts
        for thread in threads:
            thread.join()
    assert [contents[i] for i in range(3)] == [LONG, "second", "third"]
