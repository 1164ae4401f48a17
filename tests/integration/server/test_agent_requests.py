"""Requests captured from real agents (Claude Code 2.1, Codex CLI 0.171, opencode 1.18),
trimmed, replayed through a live scripted server with httpx: a whole tool-using turn
each, with the exact fields, headers and paths those clients send (docs/agents.md).

The scripted outputs are the ones the captures were taken with, so the second request
of each turn replays the first turn's sampled output; only the tool-call id is swapped
for the one the server handed out, as the agent would.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.integration.server.live_server import LiveServer, live_server, tool_call_dsml

CAPTURES = Path(__file__).parent / "agent_requests"
ANSWER = "Saw the listing.</think>The directory contains hello.txt."
OPENCODE_TITLE = "Title.</think>Listing files"


def tool_turn(name: str, **params: str) -> str:
    return "I should list the files.</think>Let me look." + tool_call_dsml(name, **params)


OPENCODE_TOOL_TURN = tool_turn("bash", command="ls", description="List files")


def captures(name: str) -> list[dict[str, Any]]:
    return list(json.loads((CAPTURES / f"{name}.json").read_text(encoding="utf-8")))


def swap_id(capture: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    return dict(json.loads(json.dumps(capture).replace(old, new)))


def sse(server: LiveServer, capture: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """POST a captured request; the stream as (event name, decoded data) pairs."""
    events: list[tuple[str | None, Any]] = []
    with httpx.stream(
        "POST",
        server.url + capture["path"],
        headers=capture["headers"],
        content=json.dumps(capture["body"]).encode(),
        timeout=60,
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
                events.append((name, data if data == "[DONE]" else json.loads(data)))
                name = None
    return events


TRACES: dict[str, io.StringIO] = {}  # server url -> its trace


@pytest.fixture
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    trace = io.StringIO()
    with live_server(tmp_path, request.param, trace, ctx=16384) as live:
        TRACES[live.url] = trace
        yield live
        del TRACES[live.url]


def sources(server: LiveServer) -> list[str]:
    """The server's cache decisions so far, in job order (docs/reference/server.md §4.2)."""
    return re.findall(r"cache decision --- .*source=(\S+)", TRACES[server.url].getvalue())


@pytest.mark.parametrize(
    "server",
    [[tool_turn("Bash", command="ls", description="List files"), ANSWER]],
    indirect=True,
)
def test_claude_code_turn_with_its_fields_headers_and_beta_path(server: LiveServer) -> None:
    first, second = captures("claude_code")
    assert first["path"] == "/v1/messages?beta=true"
    assert first["body"]["thinking"] == {"type": "adaptive"}
    assert "context_management" in first["body"] and "output_config" in first["body"]

    events = sse(server, first)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-1] == "message_stop"
    assert all(name == data["type"] for name, data in events)
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert [b["type"] for b in starts] == ["thinking", "text", "tool_use"]
    tool_use = starts[2]
    assert tool_use["name"] == "Bash" and tool_use["id"].startswith("toolu_")
    partial = "".join(
        d["delta"]["partial_json"]
        for n, d in events
        if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    )
    assert json.loads(partial) == {"command": "ls", "description": "List files"}
    delta = next(d for n, d in events if n == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use"
    prompt = events[0][1]["message"]["usage"]["cache_creation_input_tokens"]

    old_id = second["body"]["messages"][-1]["content"][0]["tool_use_id"]
    events = sse(server, swap_id(second, old_id, tool_use["id"]))
    text = "".join(
        d["delta"]["text"]
        for n, d in events
        if n == "content_block_delta" and d["delta"]["type"] == "text_delta"
    )
    assert text == "The directory contains hello.txt."
    assert next(d for n, d in events if n == "message_delta")["delta"]["stop_reason"] == "end_turn"
    usage = events[0][1]["message"]["usage"]
    assert usage["cache_read_input_tokens"] >= prompt  # continued from the live state
    # by tool_use_id (docs/reference/server.md §5.4)
    assert sources(server) == ["none", "anthropic-tool-output"]

    # count_tokens (Claude Code calls it for /context): the same prompt length
    counted = httpx.post(
        server.url + "/v1/messages/count_tokens?beta=true",
        headers=first["headers"],
        content=json.dumps({k: v for k, v in first["body"].items() if k != "stream"}).encode(),
    )
    assert counted.status_code == 200
    assert counted.json() == {"input_tokens": prompt}
    refused = httpx.post(server.url + "/v1/messages/count_tokens", json={"messages": 3})
    assert refused.status_code == 400
    assert refused.json()["type"] == "error"  # Anthropic's error shape
    assert refused.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("server", [[tool_turn("exec_command", cmd="ls"), ANSWER]], indirect=True)
def test_codex_turn_with_developer_messages_hosted_tools_and_metadata(server: LiveServer) -> None:
    first, second = captures("codex")
    body = first["body"]
    assert {"include", "prompt_cache_key", "client_metadata"} <= body.keys()
    assert {t["type"] for t in body["tools"]} == {"function", "namespace", "web_search"}

    events = sse(server, first)
    types = [d["type"] for _, d in events]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    output = events[-1][1]["response"]["output"]
    assert [item["type"] for item in output] == ["reasoning", "message", "function_call"]
    assert output[0]["summary"][0]["text"] == "I should list the files."
    assert output[1]["content"][0]["text"] == "Let me look."
    call = output[2]
    assert call["name"] == "exec_command" and json.loads(call["arguments"]) == {"cmd": "ls"}

    old_id = next(i for i in second["body"]["input"] if i["type"] == "function_call")["call_id"]
    events = sse(server, swap_id(second, old_id, call["call_id"]))
    final = events[-1][1]["response"]
    assert final["status"] == "completed"
    message = next(item for item in final["output"] if item["type"] == "message")
    assert message["content"][0]["text"] == "The directory contains hello.txt."
    assert final["usage"]["input_tokens_details"]["cached_tokens"] > 0
    # the replayed transcript (docs/reference/server.md §5.3)
    assert sources(server) == ["none", "responses-visible"]


@pytest.mark.parametrize("server", [[OPENCODE_TITLE, OPENCODE_TOOL_TURN, ANSWER]], indirect=True)
def test_opencode_title_request_then_tool_turn(server: LiveServer) -> None:
    title, first, second = captures("opencode")
    assert "tools" not in title["body"] and title["body"]["reasoning_effort"] == "low"

    events = [d for _, d in sse(server, title)]
    assert events[-1] == "[DONE]"
    content = "".join(c["delta"].get("content", "") for e in events[:-1] for c in e["choices"])
    assert content == "Listing files"
    assert events[-2]["choices"] == [] and events[-2]["usage"]["completion_tokens"] > 0

    chunks = [d for _, d in sse(server, first)][:-1]
    deltas = [c["delta"] for e in chunks for c in e["choices"]]
    headers = [t for d in deltas for t in d.get("tool_calls", []) if "id" in t]
    assert [(h["index"], h["function"]["name"]) for h in headers] == [(0, "bash")]
    arguments = "".join(
        t["function"].get("arguments", "") for d in deltas for t in d.get("tool_calls", [])
    )
    assert json.loads(arguments) == {"command": "ls", "description": "List files"}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"

    old_id = second["body"]["messages"][-1]["tool_call_id"]
    chunks = [d for _, d in sse(server, swap_id(second, old_id, headers[0]["id"]))][:-1]
    content = "".join(c["delta"].get("content", "") for e in chunks for c in e["choices"])
    assert content == "The directory contains hello.txt."
    assert chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert sources(server)[-1] == "memory-token"  # chat completions has no id binding
