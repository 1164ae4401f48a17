"""Request intake per API: defaults, thinking controls, aliases, fields agents send."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ds4.domain.chat import (
    AssistantMessage,
    SystemMessage,
    ThinkMode,
    ToolResultMessage,
    UserMessage,
)
from ds4.domain.errors import RequestError
from ds4.wire.anthropic import parse_messages, read_messages
from ds4.wire.chat import parse_chat_completion
from ds4.wire.completions import parse_completion
from ds4.wire.replies import http_status
from ds4.wire.requests import scan_json
from ds4.wire.responses_request import parse_responses

HI = [{"role": "user", "content": "hi"}]


def body(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def test_chat_defaults_a01() -> None:
    request = parse_chat_completion(body(messages=HI)).generation
    assert request.think_mode is ThinkMode.HIGH
    s = request.sampling
    assert (s.temperature, s.top_p, s.top_k, s.min_p) == (1.0, 1.0, 0, 0.05)
    assert request.max_tokens is None and not request.stream


@pytest.mark.parametrize(
    ("fields", "mode"),
    [
        ({"model": "deepseek-chat"}, ThinkMode.NONE),
        ({"model": "deepseek-chat", "reasoning_effort": "high"}, ThinkMode.NONE),
        ({"model": "deepseek-chat", "thinking": {"type": "enabled"}}, ThinkMode.HIGH),
        ({"reasoning_effort": "max"}, ThinkMode.MAX),
        ({"reasoning_effort": "none"}, ThinkMode.NONE),
        ({"think": False}, ThinkMode.NONE),
    ],
)
def test_chat_thinking_controls(fields: dict[str, object], mode: ThinkMode) -> None:
    assert parse_chat_completion(body(messages=HI, **fields)).generation.think_mode is mode


def test_unknown_effort_and_wrong_types_are_400() -> None:
    for bad in (
        body(messages=HI, reasoning_effort="banana"),
        body(messages=HI, stream="yes"),
        body(messages=HI, max_tokens=1.5),
        b'{"messages": [], "temperature": NaN}',
    ):
        with pytest.raises(RequestError) as caught:
            parse_chat_completion(bad)
        assert http_status(caught.value.kind) == 400


def test_nesting_limit_a59() -> None:
    assert not scan_json(b"[" * 256 + b"]" * 256, max_depth=256, max_values=10**6).too_deep
    assert scan_json(b"[" * 257 + b"]" * 257, max_depth=256, max_values=10**6).too_deep
    quoted = b'[["[[[[\\"[["]]'  # brackets inside strings (escaped quotes too) do not count
    assert not scan_json(quoted, max_depth=2, max_values=10**6).too_deep
    with pytest.raises(RequestError):
        parse_chat_completion(b"[" * 257 + b"]" * 257)


def test_stops_and_usage_options() -> None:
    parsed = parse_chat_completion(
        body(
            messages=HI,
            stop=["END", "", 3, "STOP"],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert parsed.generation.stops == ("END", "STOP") and parsed.reply.include_usage


def test_completion_renders_as_fixed_template_messages() -> None:
    request = parse_completion(body(prompt=["first", "ignored"], think=False)).generation
    assert request.messages == (SystemMessage("You are a helpful assistant"), UserMessage("first"))
    assert request.think_mode is ThinkMode.NONE
    with pytest.raises(RequestError, match="missing prompt"):
        parse_completion(body(model="m"))


def test_anthropic_claude_code_request() -> None:
    request = parse_messages(
        body(
            model="claude-opus",
            max_tokens=64,
            system=[
                {"type": "text", "text": "x-anthropic-billing-header: abc"},
                {
                    "type": "text",
                    "text": "You are Claude Code.",
                    "cache_control": {"type": "ephemeral"},
                },
            ],
            thinking={"type": "adaptive"},
            context_management={"edits": []},
            output_config={"effort": "max"},
            metadata={"user_id": "u"},
            tools=[{"name": "Bash", "input_schema": {"type": "object"}, "cache_control": {}}],
            messages=[
                {"role": "user", "content": [{"type": "text", "text": "run ls"}]},
                {
                    "content": [
                        {"type": "thinking", "thinking": "need ls", "signature": "s"},
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "Bash",
                            "input": {"command": "ls"},
                        },
                    ],
                    "role": "assistant",
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}
                    ],
                },
            ],
        )
    ).generation
    assert request.think_mode is ThinkMode.MAX  # adaptive counts as explicit, effort max
    assert "cache_control" not in request.schemas[0].line
    assistant = request.messages[1]
    assert isinstance(assistant, AssistantMessage) and assistant.reasoning == "need ls"
    assert assistant.tool_calls[0].id == "toolu_1"
    assert request.messages[2] == ToolResultMessage("a.txt", tool_call_id="toolu_1")
    assert request.messages[-1] == SystemMessage("You are Claude Code.")


def test_responses_codex_request() -> None:
    request = parse_responses(
        body(
            model="gpt-5-codex",
            instructions="be a coder",
            input=[
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "rules"}],
                },
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "ls"}],
                },
                {
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": "think"}],
                    "encrypted_content": "x",
                },
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "shell",
                    "arguments": '{"cmd":"ls"}',
                },
                {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
            ],
            tools=[{"type": "function", "name": "shell", "parameters": {}}, {"type": "web_search"}],
            tool_choice="auto",
            reasoning={"effort": "medium", "summary": "auto"},
            include=["reasoning.encrypted_content"],
            prompt_cache_key="k",
            client_metadata={"a": "b"},
            store=False,
        )
    ).generation
    assert [s.name for s in request.schemas] == ["shell"]
    assert request.reasoning_summary and request.think_mode is ThinkMode.HIGH
    assert request.messages[0] == SystemMessage("be a coder")
    call_message = request.messages[3]
    assert isinstance(call_message, AssistantMessage) and call_message.reasoning == "think"
    assert call_message.tool_calls[0].id == "call_1"
    assert request.messages[4] == ToolResultMessage("a.txt", tool_call_id="call_1")


def test_responses_policies() -> None:
    required = parse_responses(body(input="x", tool_choice="required")).generation
    assert required.tool_choice.mode == "required"
    named = parse_responses(body(input="x", tool_choice={"type": "function", "name": "f"}))
    assert named.generation.tool_choice.name == "f"
    with pytest.raises(RequestError, match="'allowed_tools' is not supported"):
        parse_responses(body(input="x", tool_choice={"type": "allowed_tools"}))
    with pytest.raises(RequestError, match="input_image content is not supported"):
        parse_responses(body(input=[{"role": "user", "content": [{"type": "input_image"}]}]))
    with pytest.raises(RequestError, match="unsupported content part"):
        parse_responses(body(input=[{"role": "user", "content": [{"type": "other"}]}]))
    with pytest.raises(RequestError, match="missing input"):
        parse_responses(body(model="m"))


ASSISTANT = {"role": "assistant", "content": "hello"}


@pytest.mark.parametrize(
    ("parse", "fields", "message", "param"),
    [
        (
            parse_chat_completion,
            {"messages": [*HI, {"role": "critic", "content": "x"}]},
            "messages[1].role: unknown role 'critic'",
            "messages",
        ),
        (parse_chat_completion, {"messages": []}, "messages: empty", "messages"),
        (parse_chat_completion, {"messages": [*HI, ASSISTANT]}, "messages: nothing", "messages"),
        (
            parse_messages,
            {"messages": [*HI, {"role": "tool", "content": "x"}]},
            "messages.1.role: unknown role 'tool'",
            None,
        ),
        (parse_messages, {"messages": []}, "messages: empty", None),
        (parse_messages, {"messages": [*HI, ASSISTANT]}, "messages: nothing to answer", None),
        (
            parse_responses,
            {"input": [*HI, {"type": "message", "role": "tool", "content": "x"}]},
            "input[1].role: unknown role 'tool'",
            "input",
        ),
        (
            parse_responses,
            {"input": [{"type": "note", "text": "x"}]},
            "input[0].type: unsupported input item type 'note'",
            "input",
        ),
        (parse_responses, {"input": []}, "input: empty", "input"),
        (
            parse_responses,
            {
                "input": [
                    *HI,
                    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "t"}]},
                ]
            },
            "input: nothing to answer",
            "input",
        ),
    ],
)
def test_unknown_roles_and_nothing_to_answer_are_400_naming_the_field(
    parse: Any, fields: dict[str, object], message: str, param: str | None
) -> None:
    with pytest.raises(RequestError) as refused:
        parse(body(**fields))
    assert http_status(refused.value.kind) == 400
    assert refused.value.message.startswith(message)
    assert refused.value.param == param


def test_anthropic_system_role_in_messages_and_count_tokens_of_a_finished_turn() -> None:
    # Claude Code sends role "system" inside messages (docs/agents.md): still accepted.
    request = parse_messages(body(messages=[{"role": "system", "content": "s"}, *HI])).generation
    assert request.messages == (SystemMessage("s"), UserMessage("hi"))
    # count_tokens counts a conversation ending with the assistant's turn, as the real
    # API does; an unknown role is refused there too.
    assert read_messages(body(messages=[*HI, ASSISTANT])).messages[-1] == AssistantMessage("hello")
    with pytest.raises(RequestError, match="unknown role"):
        read_messages(body(messages=[{"role": "robot", "content": "x"}]))


def test_a_type_that_is_not_a_string_is_read_as_no_type_never_a_crash() -> None:
    """Content parts and items whose `type` is a list or an object (unhashable) once
    crashed the content checks; they are parts of no known type."""
    chat = parse_chat_completion(
        body(messages=[{"role": "user", "content": [{"type": [1], "text": "a"}, "b"]}])
    )
    assert chat.generation.messages == (UserMessage("ab"),)
    blocks = [{"type": {}}, {"type": "tool_result", "tool_use_id": "t", "content": [{"type": [2]}]}]
    anthropic = parse_messages(body(messages=[{"role": "user", "content": [*blocks, "q"]}]))
    assert anthropic.generation.messages == (
        ToolResultMessage("", tool_call_id="t"),
        UserMessage("q"),
    )
    with pytest.raises(RequestError, match="unsupported content part") as part:
        parse_responses(body(input=[{"role": "user", "content": [{"type": [1], "text": "x"}]}]))
    with pytest.raises(RequestError, match=r"input\[0\]\.type: unsupported input item") as item:
        parse_responses(body(input=[{"type": [1]}]))
    assert http_status(part.value.kind) == http_status(item.value.kind) == 400
