"""Freeform custom tools on /v1/responses (ADR 0043) with the real openai SDK: Codex's
apply_patch as a `custom` tool, `custom_tool_call` output items (streamed through the
SDK's Responses helper and not), their replay with `custom_tool_call_output`, and a
bad custom tool answered with a 400 in OpenAI's error shape."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from tests.integration.server.live_server import LiveServer, live_server, tool_call_dsml

PATCH = (
    "*** Begin Patch\n*** Update File: hello.py\n@@\n"
    '-print("hi")\n+print("hello & <bye>")\n*** End Patch'
)
PATCH_TURN = "Patch hello.py.</think>Editing." + tool_call_dsml("apply_patch", arguments=PATCH)
ANSWER_TURN = "It applied.</think>Done."
APPLY_PATCH: dict[str, Any] = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Use the apply_patch tool to edit files.",
    "format": {
        "type": "grammar",
        "syntax": "lark",
        "definition": 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF',
    },
}
ASK = [{"role": "user", "content": "say hello louder in hello.py"}]


@pytest.fixture
def trace() -> io.StringIO:
    return io.StringIO()


@pytest.fixture
def server(tmp_path: Any, trace: io.StringIO) -> Iterator[LiveServer]:
    with live_server(tmp_path, [PATCH_TURN, ANSWER_TURN], trace) as live:
        yield live


def test_stream_helper_yields_a_custom_tool_call_then_the_replay_continues(
    server: LiveServer, trace: io.StringIO
) -> None:
    oai: Any = openai.OpenAI(base_url=server.base, api_key="unused", max_retries=0)
    deltas: list[str] = []
    done: list[str] = []
    with oai.responses.stream(model="m", input=ASK, tools=[APPLY_PATCH]) as stream:
        for event in stream:
            if event.type == "response.custom_tool_call_input.delta":
                deltas.append(event.delta)
            elif event.type == "response.custom_tool_call_input.done":
                done.append(event.input)
        final = stream.get_final_response()
    assert final.status == "completed"
    reasoning, message, call = final.output
    assert reasoning.type == "reasoning" and reasoning.summary == []  # no summaries asked
    assert message.type == "message" and message.content[0].text == "Editing."
    assert call.type == "custom_tool_call" and call.name == "apply_patch"
    assert call.input == PATCH and "".join(deltas) == PATCH and done == [PATCH]
    assert call.call_id.startswith("call_") and call.id.startswith("ctc_")

    replay = [
        *ASK,
        {"type": "message", "role": "assistant", "content": "Editing."},
        {
            "type": "custom_tool_call",
            "call_id": call.call_id,
            "name": call.name,
            "input": call.input,
        },
        {
            "type": "custom_tool_call_output",
            "call_id": call.call_id,
            "output": "Success. Updated the following files:\nM hello.py",
        },
    ]
    answer = oai.responses.create(model="m", input=replay, tools=[APPLY_PATCH])
    assert answer.status == "completed" and answer.output_text == "Done."
    # the replayed call found the live state: a Responses binding continued it
    assert re.findall(r"source=(\S+)", trace.getvalue())[-1].startswith("responses-")
    assert answer.usage.input_tokens_details.cached_tokens > final.usage.input_tokens


def test_non_streamed_custom_tool_call_item(server: LiveServer) -> None:
    oai: Any = openai.OpenAI(base_url=server.base, api_key="unused", max_retries=0)
    reply = oai.responses.create(model="m", input=ASK, tools=[APPLY_PATCH])
    call = reply.output[-1]
    assert (call.type, call.name, call.input, call.status) == (
        "custom_tool_call",
        "apply_patch",
        PATCH,
        "completed",
    )


def test_a_bad_custom_tool_is_a_400_in_openai_shape(server: LiveServer) -> None:
    bad = {**APPLY_PATCH, "format": {"type": "grammar", "syntax": "ebnf", "definition": "x"}}
    reply = httpx.post(server.base + "/responses", json={"input": "x", "tools": [bad]})
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "grammar syntax 'ebnf' is not supported" in error["message"]
