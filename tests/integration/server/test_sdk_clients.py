"""The real openai and anthropic SDKs against a live scripted server: all four
endpoints, streaming and not, tool calls, reasoning, usage with cached tokens."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from tests.integration.server.live_server import LiveServer, live_server, tool_call_dsml

TOOL_TURN = "I should list files.</think>Listing." + tool_call_dsml("bash", command="ls -la")
ANSWER_TURN = "The user wants a greeting.</think>Hello there!"
OPENAI_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a shell command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]
ANTHROPIC_TOOLS = [
    {
        "name": "bash",
        "description": "run a shell command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
]


@pytest.fixture(scope="module")
def tool_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Odd requests get a tool call, even ones an answer (the script cycles)."""
    with live_server(tmp_path_factory.mktemp("srv"), [TOOL_TURN, ANSWER_TURN]) as server:
        yield server


@pytest.fixture
def oai(tool_server: LiveServer) -> Any:  # SDK overloads are too narrow for raw dict params
    return openai.OpenAI(base_url=tool_server.base, api_key="unused", max_retries=0)


@pytest.fixture
def claude(tool_server: LiveServer) -> Any:
    return anthropic.Anthropic(base_url=tool_server.url, api_key="unused", max_retries=0)


def test_chat_tool_round_trip_then_answer_with_cached_prefix(oai: Any) -> None:
    messages: list[dict[str, object]] = [{"role": "user", "content": "list my files"}]
    first = oai.chat.completions.create(
        model="deepseek-v4-flash",
        messages=messages,
        tools=OPENAI_TOOLS,
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Listing."
    assert choice.message.reasoning_content == "I should list files."
    call = choice.message.tool_calls[0]
    assert call.id.startswith("call_") and call.function.name == "bash"
    assert json.loads(call.function.arguments) == {"command": "ls -la"}
    messages += [
        {
            "role": "assistant",
            "content": "Listing.",
            "reasoning_content": "I should list files.",
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": "bash", "arguments": call.function.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "a.txt b.txt"},
    ]
    second = oai.chat.completions.create(
        model="deepseek-v4-flash",
        messages=messages,
        tools=OPENAI_TOOLS,
    )
    assert second.choices[0].message.content == "Hello there!"
    assert second.choices[0].finish_reason == "stop"
    usage = second.usage
    assert usage is not None and usage.prompt_tokens_details is not None
    # exact DSML replay: the whole first turn (prompt + sampled call) is reused
    assert usage.prompt_tokens_details.cached_tokens > first.usage.prompt_tokens


def _stream_chat(oai: Any) -> dict[str, Any]:
    stream = oai.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "go"}],
        tools=OPENAI_TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    got: dict[str, Any] = {"reasoning": "", "content": "", "args": "", "ids": set()}
    for chunk in stream:
        if chunk.usage is not None:
            got["usage"] = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            got["reasoning"] += getattr(delta, "reasoning_content", None) or ""
            got["content"] += delta.content or ""
            for tc in delta.tool_calls or []:
                if tc.id:
                    got["ids"].add(tc.id)
                if tc.function and tc.function.arguments:
                    got["args"] += tc.function.arguments
            got["finish"] = choice.finish_reason or got.get("finish")
    return got


def test_chat_stream_tool_call_deltas_accumulate(oai: Any) -> None:
    runs = sorted((_stream_chat(oai) for _ in range(2)), key=lambda r: str(r["finish"]))
    answer, tool = runs  # "stop" < "tool_calls"
    assert answer["finish"] == "stop" and answer["content"] == "Hello there!"
    assert tool["finish"] == "tool_calls"
    assert tool["reasoning"] == "I should list files." and tool["content"] == "Listing."
    assert len(tool["ids"]) == 1 and json.loads(str(tool["args"])) == {"command": "ls -la"}
    usage = tool["usage"]
    assert usage.completion_tokens > 0


def test_completions_return_raw_text(oai: Any) -> None:
    result = oai.completions.create(model="m", prompt="say hi", max_tokens=200)
    text = result.choices[0].text
    assert "</think>" in text  # thinking on by default: raw reasoning + answer
    streamed = "".join(
        c.choices[0].text
        for c in oai.completions.create(model="m", prompt="say hi", max_tokens=200, stream=True)
        if c.choices
    )
    assert "</think>" in streamed


def test_responses_create_and_stream_helper(oai: Any) -> None:
    tools = [
        {
            "type": "function",
            "name": "bash",
            "parameters": OPENAI_TOOLS[0]["function"]["parameters"],
        }
    ]
    finals = []
    for _ in range(2):  # one of the two gets the tool call, whatever the cycle position
        with oai.responses.stream(
            model="m",
            input=[{"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"}],
            tools=tools,
            reasoning={"summary": "auto"},
        ) as stream:
            finals.append(stream.get_final_response())
    kinds = {item.type for final in finals for item in final.output}
    assert {"reasoning", "message", "function_call"} <= kinds
    for final in finals:
        assert final.status == "completed"
        assert final.usage is not None and final.usage.input_tokens > 0
    plain = oai.responses.create(model="m", input="hello", tools=tools)
    assert plain.status == "completed" and plain.output


def test_anthropic_stream_helper_and_tool_use(claude: Any) -> None:
    finals = []
    for _ in range(2):
        with claude.messages.stream(
            model="deepseek-v4-flash",
            max_tokens=1000,
            system=[{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
            messages=[{"role": "user", "content": "list files"}],
            tools=ANTHROPIC_TOOLS,
            thinking={"type": "enabled", "budget_tokens": 500},
            metadata={"user_id": "u"},
        ) as stream:
            finals.append(stream.get_final_message())
    tool_msgs = [m for m in finals if m.stop_reason == "tool_use"]
    assert len(tool_msgs) == 1
    blocks = {b.type: b for b in tool_msgs[0].content}
    assert blocks["thinking"].thinking == "I should list files."
    assert blocks["tool_use"].input == {"command": "ls -la"}
    assert blocks["tool_use"].id.startswith("toolu_")
    answer = next(m for m in finals if m.stop_reason == "end_turn")
    assert [b.type for b in answer.content] == ["thinking", "text"]


def test_anthropic_non_streaming_usage_reports_cache(claude: Any) -> None:
    message = claude.messages.create(
        model="m", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    assert message.usage.cache_creation_input_tokens is not None
    assert message.usage.output_tokens > 0
    assert message.content
