"""docs/reference/chat-and-dsml.md §2.6 worked examples, byte for byte (ids:
tests/integration/chat)."""

from __future__ import annotations

import hashlib
import json

import pytest

from ds4.domain.chat import (
    MAX_PREFIX,
    TOOLS_HEAD,
    TOOLS_TAIL,
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkMode,
    ToolResultMessage,
    UserMessage,
    effective_think_mode,
    render_chat,
    tool_schema,
)
from ds4.domain.dsml.syntax import ToolCall

BASH_SCHEMA = (
    '{"name":"bash","description":"Run a shell command","parameters":{"type":"object",'
    '"properties":{"command":{"type":"string"},"timeout":{"type":"integer"}},'
    '"required":["command"]}}'
)
E1: list[Message] = [SystemMessage("You are terse."), UserMessage("Hello")]
E4: list[Message] = [
    SystemMessage("Be careful."),
    UserMessage("List files"),
    AssistantMessage(
        content="",
        reasoning="I should run ls.",
        tool_calls=(ToolCall("bash", '{"command":"ls -la","timeout":10}'),),
    ),
    ToolResultMessage("a.txt\nb.txt"),
]
E5: list[Message] = [
    UserMessage("go"),
    AssistantMessage(tool_calls=(ToolCall("a", "{}"), ToolCall("b", '{"x":[1, 2]}'))),
    ToolResultMessage("A"),
    ToolResultMessage("B"),
]


@pytest.mark.parametrize(
    ("value", "size", "sha1"),
    [
        (MAX_PREFIX, 476, "bed6f7c6d90743ed442f3da80117db88a8fc16a6"),
        (TOOLS_HEAD, 1183, "a1799c665cc488953159d077e5aa5cc7f4ee1218"),
        (TOOLS_TAIL, 146, "ebfe73f1c2b10a58c2e5ef37bbd4bc5d21f770b0"),
    ],
)
def test_template_constants_are_byte_exact(value: str, size: int, sha1: str) -> None:
    data = value.encode()
    assert (len(data), hashlib.sha1(data).hexdigest()) == (size, sha1)


def test_e1_non_thinking_system_and_user() -> None:
    assert render_chat(E1, (), ThinkMode.NONE) == (
        "<｜begin▁of▁sentence｜>You are terse.<｜User｜>Hello<｜Assistant｜></think>"
    )


def test_e2_thinking_multi_turn_drops_old_reasoning() -> None:
    messages: list[Message] = [
        UserMessage("first"),
        AssistantMessage(content="first answer", reasoning="old hidden reasoning"),
        UserMessage("second"),
    ]
    assert render_chat(messages, (), ThinkMode.HIGH) == (
        "<｜begin▁of▁sentence｜><｜User｜>first<｜Assistant｜></think>first answer"
        "<｜end▁of▁sentence｜><｜User｜>second<｜Assistant｜><think>"
    )


def test_e3_think_max_puts_prefix_after_bos() -> None:
    rendered = render_chat(E1, (), ThinkMode.MAX)
    assert rendered == (
        "<｜begin▁of▁sentence｜>"
        + MAX_PREFIX
        + "You are terse.<｜User｜>Hello<｜Assistant｜><think>"
    )


def test_e3_think_max_below_384k_context_renders_like_think() -> None:
    small = effective_think_mode(ThinkMode.MAX, 32_768)
    assert small is ThinkMode.HIGH
    assert render_chat(E1, (), small) == render_chat(E1, (), ThinkMode.HIGH)
    assert MAX_PREFIX not in render_chat(E1, (), small)
    assert effective_think_mode(ThinkMode.MAX, 393_216) is ThinkMode.MAX
    assert effective_think_mode(ThinkMode.MAX, 393_215) is ThinkMode.HIGH


E4_SCHEMA_CANONICAL = (
    '{"name": "bash", "description": "Run a shell command", "parameters": {"type": "object",'
    ' "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},'
    ' "required": ["command"]}}'
)
E4_AFTER_SYSTEM = (
    "<｜User｜>List files<｜Assistant｜><think>I should run ls.</think>\n\n"
    "<｜DSML｜tool_calls>\n"
    '<｜DSML｜invoke name="bash">\n'
    '<｜DSML｜parameter name="command" string="true">ls -la</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="timeout" string="false">10</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls><｜end▁of▁sentence｜><｜User｜><tool_result>a.txt\n"
    "b.txt</tool_result><｜Assistant｜><think>"
)


def test_e4_tools_system_and_tool_round_trip_with_canonical_schema() -> None:
    schema = tool_schema(json.loads(BASH_SCHEMA))
    assert schema.line == E4_SCHEMA_CANONICAL
    assert render_chat(E4, [schema], ThinkMode.HIGH) == (
        "<｜begin▁of▁sentence｜>"
        + TOOLS_HEAD
        + E4_SCHEMA_CANONICAL
        + TOOLS_TAIL
        + "\n\nBe careful."
        + E4_AFTER_SYSTEM
    )


def test_e4_schema_whitespace_and_escapes_do_not_change_the_prompt() -> None:
    spaced = json.loads(json.dumps(json.loads(BASH_SCHEMA), indent=4, ensure_ascii=True))
    assert tool_schema(spaced).line == E4_SCHEMA_CANONICAL
    unicode_schema = json.loads('{"name": "caf\\u00e9", "description": "\\u65e5\\u672c"}')
    assert tool_schema(unicode_schema).line == '{"name": "café", "description": "日本"}'


def test_e5_two_calls_and_two_results_non_thinking() -> None:
    assert render_chat(E5, (), ThinkMode.NONE) == (
        "<｜begin▁of▁sentence｜><｜User｜>go<｜Assistant｜></think>\n\n"
        "<｜DSML｜tool_calls>\n"
        '<｜DSML｜invoke name="a">\n'
        "</｜DSML｜invoke>\n"
        '<｜DSML｜invoke name="b">\n'
        '<｜DSML｜parameter name="x" string="false">[1,2]</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n"
        "</｜DSML｜tool_calls><｜end▁of▁sentence｜><｜User｜><tool_result>A</tool_result>"
        "<tool_result>B</tool_result><｜Assistant｜></think>"
    )


def test_e6_default_system_thinking_one_shot() -> None:
    messages: list[Message] = [SystemMessage("You are a helpful assistant"), UserMessage("Hi")]
    assert render_chat(messages, (), ThinkMode.HIGH) == (
        "<｜begin▁of▁sentence｜>You are a helpful assistant<｜User｜>Hi<｜Assistant｜><think>"
    )
