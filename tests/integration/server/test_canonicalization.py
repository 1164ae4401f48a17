"""Post-tool-call canonicalization (docs/reference/server.md §6) through a live scripted server with
--disable-exact-dsml-tool-replay: the sampled tool block is not what the next request
renders, so the live state is rewritten before the reply and the next turn continues it."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from tests.integration.server.live_server import LiveServer, live_server, tool_call_dsml

# No blank line before the block: the canonical rendering has one, so the sampled
# tokens and the next prompt part ways inside the turn.
TOOL_TURN = "I should list files.</think>Listing." + tool_call_dsml("bash", command="ls").lstrip()
ANSWER_TURN = "Done.</think>Two files."
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a shell command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


@pytest.fixture
def trace() -> io.StringIO:
    return io.StringIO()


@pytest.fixture
def no_replay(tmp_path: Any, trace: io.StringIO) -> Iterator[LiveServer]:
    script = [TOOL_TURN, ANSWER_TURN]
    with live_server(tmp_path, script, trace, exact_tool_replay=False) as server:
        yield server


def _sources(trace: io.StringIO) -> list[str]:
    return re.findall(r"source=(\S+)", trace.getvalue())


def test_chat_tool_turn_is_canonicalized_and_the_next_turn_continues_it(
    no_replay: LiveServer, trace: io.StringIO
) -> None:
    oai: Any = openai.OpenAI(base_url=no_replay.base, api_key="unused", max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "list my files"}]
    first = oai.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    function = {"name": call.function.name, "arguments": call.function.arguments}
    log = trace.getvalue()
    assert "tool checkpoint canonicalization needs" in log
    assert "tool checkpoint canonicalization rebuilt" in log
    messages += [
        {
            "role": "assistant",
            "content": "Listing.",
            "reasoning_content": "I should list files.",
            "tool_calls": [{"id": call.id, "type": "function", "function": function}],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "a.txt b.txt"},
    ]
    second = oai.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    assert second.choices[0].message.content == "Two files."
    # the rewritten state (prompt, canonical turn, EOS) is an exact token prefix
    assert _sources(trace)[-1] == "memory-token"
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached > first.usage.prompt_tokens + first.usage.completion_tokens


def test_anthropic_tool_turn_is_canonicalized_too(
    no_replay: LiveServer, trace: io.StringIO
) -> None:
    claude: Any = anthropic.Anthropic(base_url=no_replay.url, api_key="unused", max_retries=0)
    tools = [{"name": "bash", "input_schema": {"type": "object"}}]
    first = claude.messages.create(
        model="m",
        max_tokens=200,
        tools=tools,
        messages=[{"role": "user", "content": "list my files"}],
    )
    assert first.stop_reason == "tool_use"
    assert "tool checkpoint canonicalization rebuilt" in trace.getvalue()


def test_exact_replay_keeps_the_sampled_state(tmp_path: Any, trace: io.StringIO) -> None:
    with live_server(tmp_path, [TOOL_TURN], trace) as server:
        oai: Any = openai.OpenAI(base_url=server.base, api_key="unused", max_retries=0)
        reply = oai.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "go"}], tools=TOOLS
        )
        assert reply.choices[0].finish_reason == "tool_calls"
    assert "canonicalization" not in trace.getvalue()
