"""Issue 14 item 9 (API side): fields the server cannot honour (n > 1, images and
other non-text content) and out-of-range log-probability fields are each API's 400
naming the field, not silence; fields that ask for nothing pass. Anthropic message ids
look like the real API's, msg_…"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.integration.server.live_server import LiveServer, live_server

USER = {"role": "user", "content": "hi"}
IMAGE_URL = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
ANTHROPIC_IMAGE = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("srv"), ["</think>ok"] * 40) as live:
        yield live


def post(server: LiveServer, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=30)


@pytest.mark.parametrize(
    ("path", "fields", "param"),
    [
        ("/v1/chat/completions", {"n": 2}, "n"),
        ("/v1/chat/completions", {"logprobs": "yes"}, "logprobs"),
        ("/v1/chat/completions", {"top_logprobs": 5}, "top_logprobs"),
        ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ("/v1/chat/completions", {"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
        ("/v1/completions", {"n": 3}, "n"),
        ("/v1/completions", {"best_of": 2}, "best_of"),
        ("/v1/completions", {"logprobs": 6}, "logprobs"),
        ("/v1/completions", {"logprobs": True}, "logprobs"),
        ("/v1/completions", {"top_logprobs": 2}, "top_logprobs"),
        ("/v1/completions", {"echo": 1}, "echo"),
        ("/v1/completions", {"prompt": [[1, 2], [3]]}, "prompt"),
        ("/v1/completions", {"prompt": [1, 10**9]}, "prompt"),
        ("/v1/responses", {"top_logprobs": 21}, "top_logprobs"),
        ("/v1/responses", {"include": "message.output_text.logprobs"}, "include"),
    ],
)
def test_openai_fields_that_cannot_be_honoured_are_400s(
    server: LiveServer, path: str, fields: dict[str, Any], param: str
) -> None:
    bases: dict[str, dict[str, Any]] = {"chat": {"messages": [USER]}, "responses": {"input": "hi"}}
    base = next((v for k, v in bases.items() if k in path), {"prompt": "hi"})
    response = post(server, path, {**base, **fields})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert param in error["message"]


@pytest.mark.parametrize(
    "fields", [{"n": 1}, {"n": None}, {"logprobs": False}, {"top_logprobs": 0}, {}]
)
def test_fields_that_ask_for_nothing_pass(server: LiveServer, fields: dict[str, Any]) -> None:
    response = post(server, "/v1/chat/completions", {"messages": [USER], **fields})
    assert response.status_code == 200


def test_chat_image_part_is_refused_by_its_place(server: LiveServer) -> None:
    content = [{"type": "text", "text": "what is this?"}, IMAGE_URL]
    messages = [USER, {"role": "user", "content": content}]
    response = post(server, "/v1/chat/completions", {"messages": messages})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "messages"
    assert error["message"].startswith("messages[1].content[1]: image_url content is not")


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ([ANTHROPIC_IMAGE], "messages.0.content.0"),
        (
            [{"type": "tool_result", "tool_use_id": "t", "content": [ANTHROPIC_IMAGE]}],
            "messages.0.content.0.content.0",
        ),
        ([{"type": "document", "source": {"type": "text", "data": "x"}}], "messages.0.content.0"),
    ],
)
def test_anthropic_image_blocks_are_refused_in_anthropic_shape(
    server: LiveServer, content: list[dict[str, Any]], where: str
) -> None:
    body = {"max_tokens": 10, "messages": [{"role": "user", "content": content}]}
    response = post(server, "/v1/messages", body)
    assert response.status_code == 400
    payload = response.json()
    assert payload["type"] == "error" and payload["error"]["type"] == "invalid_request_error"
    assert payload["error"]["message"].startswith(f"{where}: ")


def test_responses_image_part_is_refused(server: LiveServer) -> None:
    item = {"role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]}
    response = post(server, "/v1/responses", {"input": [item]})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "input" and "input_image" in error["message"]


def test_anthropic_message_ids_are_msg_ids(server: LiveServer) -> None:
    body = {"max_tokens": 10, "messages": [USER]}
    reply = post(server, "/v1/messages", body).json()
    assert re.fullmatch(r"msg_[0-9a-f]{24}", reply["id"])
    with httpx.stream(
        "POST", server.url + "/v1/messages", json={**body, "stream": True}, timeout=30
    ) as response:
        start = next(line for line in response.iter_lines() if line.startswith("data: "))
    streamed = json.loads(start.removeprefix("data: "))["message"]["id"]
    assert re.fullmatch(r"msg_[0-9a-f]{24}", streamed) and streamed != reply["id"]
