"""Random and mutated bodies on every POST route of a real server (issue 14): each answer
is a 2xx or a 4xx in the route's own error shape; never a 5xx, never a hang.

Bodies are valid requests with fields replaced or added (known field names with any
JSON value, nested anywhere the generator reaches), arbitrary JSON values, and raw
bytes (valid bodies cut or with bytes flipped). Examples are derandomized and few
enough to run in seconds; the generators, not the count, give the coverage.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.integration.server.live_server import LiveServer, live_server

FIELDS = [
    "messages", "content", "role", "tools", "tool_choice", "max_tokens", "stream", "model",
    "temperature", "top_p", "top_k", "min_p", "seed", "stop", "stop_sequences", "input",
    "prompt", "thinking", "think", "reasoning_effort", "reasoning", "n", "best_of",
    "logprobs", "top_logprobs", "system", "type", "text", "tool_calls", "function",
    "arguments", "name", "id", "tool_call_id", "tool_use_id", "input_schema", "parameters",
    "stream_options", "include_usage", "output_config", "instructions", "max_output_tokens",
    "max_completion_tokens", "image_url", "source", "call_id", "output", "status", "summary",
    "previous_response_id", "namespace", "effort", "reasoning_content",
]  # fmt: skip
BASES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8},
    "/v1/completions": {"prompt": "hi", "max_tokens": 8},
    "/v1/messages": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8},
    "/v1/messages/count_tokens": {"messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"input": "hi", "max_output_tokens": 8},
}

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["user", "assistant", "tool", "system", "function", "text", "image"])
)
keys = st.sampled_from(FIELDS) | st.text(max_size=6)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=16,
)


@st.composite
def mutated_body(draw: st.DrawFn, path: str) -> bytes:
    body: Any = json.loads(json.dumps(BASES[path]))
    shape = draw(st.sampled_from(["fields", "message", "value", "bytes"]))
    if shape == "fields":
        body.update(draw(st.dictionaries(keys, json_values, min_size=1, max_size=4)))
    elif shape == "message" and "messages" in body:
        message = draw(st.dictionaries(keys, json_values, max_size=5))
        body["messages"] = draw(st.sampled_from([[message], [*body["messages"], message]]))
    elif shape == "value":
        body = draw(json_values)
    encoded = json.dumps(body).encode()
    if shape == "bytes":
        cut = draw(st.integers(min_value=0, max_value=len(encoded)))
        flips = draw(
            st.lists(
                st.tuples(st.integers(0, len(encoded) - 1), st.binary(min_size=1, max_size=1)),
                max_size=3,
            )
        )
        data = bytearray(encoded)
        for at, byte in flips:
            data[at : at + 1] = byte
        encoded = bytes(data[:cut]) if draw(st.booleans()) else bytes(data)
    return encoded


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("srv"), ["</think>ok"], ctx=2048) as live:
        yield live


@pytest.fixture(scope="module")
def client(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def check_answer(path: str, response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:300])
    if response.status_code < 300:
        return
    assert 400 <= response.status_code < 500
    payload = response.json()
    if path.startswith("/v1/messages"):
        assert payload["type"] == "error"
        assert isinstance(payload["error"]["type"], str)
        assert isinstance(payload["error"]["message"], str)
    else:
        assert isinstance(payload["error"]["type"], str)
        assert isinstance(payload["error"]["message"], str)


@pytest.mark.parametrize("path", list(BASES))
@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_body_gets_a_2xx_or_the_routes_4xx(
    client: httpx.Client, path: str, data: st.DataObject
) -> None:
    body = data.draw(mutated_body(path))
    response = client.post(path, content=body, headers={"Content-Type": "application/json"})
    check_answer(path, response)
