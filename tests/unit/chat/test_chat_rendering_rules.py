"""Renderer rules (docs/reference/chat-and-dsml.md §2.2–2.3, §3.2) and request-body rendering."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4.domain.chat import (
    EOS,
    MAX_PREFIX,
    SPECIAL_STRINGS,
    TOOL_RESULT_CLOSE,
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkMode,
    ToolResultMessage,
    ToolSchemaError,
    UserMessage,
    render_chat,
    render_continuation_tail,
    tool_schema,
)
from ds4.domain.dsml.syntax import FULL, ToolCall, escape_attribute
from ds4.wire.chat import ChatRequestError, render_chat_request

SCHEMA = tool_schema({"name": "bash", "parameters": {}})


def test_reasoning_is_kept_with_tool_context_even_without_schemas() -> None:
    messages: list[Message] = [
        UserMessage("where?"),
        AssistantMessage(reasoning="tool reasoning", tool_calls=(ToolCall("pwd", "{}"),)),
        ToolResultMessage("/tmp"),
    ]
    for schemas in ((), (SCHEMA,)):
        rendered = render_chat(messages, schemas, ThinkMode.HIGH)
        assert "<think>tool reasoning</think>" in rendered
        assert "<tool_result>/tmp</tool_result>" in rendered


def test_tools_come_before_client_system_text_and_developer_is_hoisted() -> None:
    messages: list[Message] = [
        UserMessage("hi"),
        SystemMessage("client rules"),
        SystemMessage("developer rules"),
    ]
    rendered = render_chat(messages, (SCHEMA,), ThinkMode.NONE)
    assert (
        rendered.index("## Tools") < rendered.index("client rules") < rendered.index("<｜User｜>")
    )
    assert "client rules\n\ndeveloper rules<｜User｜>hi" in rendered


def test_trailing_assistant_gets_eos_and_no_new_prefix() -> None:
    messages: list[Message] = [UserMessage("q"), AssistantMessage(content="a")]
    assert render_chat(messages, (), ThinkMode.HIGH).endswith(
        "<｜User｜>q<｜Assistant｜><think></think>a" + EOS
    )


def test_assistant_without_a_preceding_user_gets_no_marker() -> None:
    rendered = render_chat([AssistantMessage(content="hello")], (), ThinkMode.HIGH)
    assert rendered == "<｜begin▁of▁sentence｜>hello" + EOS


def test_tool_results_protect_only_their_closing_tag() -> None:
    output = "console.log('<<< < > >>>'); </tool_result> & done"
    rendered = render_chat([ToolResultMessage(output)], (), ThinkMode.NONE)
    assert "console.log('<<< < > >>>'); &lt;/tool_result> & done</tool_result>" in rendered


def test_user_after_tool_results_opens_a_new_user_turn() -> None:
    messages: list[Message] = [ToolResultMessage("r"), UserMessage("next")]
    rendered = render_chat(messages, (), ThinkMode.NONE)
    assert "<｜User｜><tool_result>r</tool_result><｜User｜>next<｜Assistant｜></think>" in rendered


def test_continuation_tail_renders_only_the_new_results() -> None:
    tail = render_continuation_tail(
        [ToolResultMessage("/tmp"), SystemMessage("ignored")], ThinkMode.HIGH
    )
    assert tail == EOS + "<｜User｜><tool_result>/tmp</tool_result><｜Assistant｜><think>"


def test_schema_without_name_or_with_nan_is_rejected() -> None:
    with pytest.raises(ToolSchemaError, match="name"):
        tool_schema({"description": "x"})
    with pytest.raises(ToolSchemaError, match="finite"):
        tool_schema({"name": "x", "bad": float("nan")})


REQUEST = {
    "model": "deepseek-v4-flash",
    "messages": [
        {"role": "developer", "content": [{"type": "text", "text": "Be "}, "careful."]},
        {"role": "user", "content": "List files"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "I should run ls.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command":"ls -la","timeout":10}'},
                },
                {"id": "call_2", "function": {"name": "dropped"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "description": "Run a shell command",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "command": {"type": "string"},
                        "timeout": {"type": "integer"},
                    },
                    "required": ["command"],
                },
            },
        }
    ],
}


def _body(**changes: object) -> bytes:
    return json.dumps({**REQUEST, **changes}).encode()


def test_request_body_renders_like_the_e4_worked_example() -> None:
    rendered = render_chat_request(_body(), mode=ThinkMode.HIGH, context_size=32_768)
    expected_messages: list[Message] = [
        SystemMessage("Be careful."),
        UserMessage("List files"),
        AssistantMessage(
            reasoning="I should run ls.",
            tool_calls=(ToolCall("bash", '{"command":"ls -la","timeout":10}', "call_1"),),
        ),
        ToolResultMessage("a.txt\nb.txt", tool_call_id="call_1"),
    ]
    function = REQUEST["tools"][0]["function"]  # type: ignore[index]
    assert rendered == render_chat(expected_messages, [tool_schema(function)], ThinkMode.HIGH)
    assert (
        "Be careful.<｜User｜>List files<｜Assistant｜><think>I should run ls.</think>" in rendered
    )


def test_tool_choice_none_drops_the_tool_block() -> None:
    rendered = render_chat_request(_body(tool_choice="none"), mode=None, context_size=32_768)
    assert "## Tools" not in rendered
    assert "<think>I should run ls.</think>" in rendered  # history still has tool context


@pytest.mark.parametrize(
    ("changes", "mode", "context", "ending", "max_prefix"),
    [
        ({}, None, 32_768, "<think>", False),
        ({"reasoning_effort": "max"}, None, 393_216, "<think>", True),
        ({"reasoning_effort": "max"}, None, 32_768, "<think>", False),
        ({"reasoning_effort": "none"}, None, 32_768, "</think>", False),
        ({"model": "deepseek-chat"}, None, 32_768, "</think>", False),
        ({"model": "deepseek-chat", "thinking": None}, None, 32_768, "<think>", False),
        ({"thinking": {"type": "disabled", "budget_tokens": 1}}, None, 32_768, "</think>", False),
        ({"think": False}, ThinkMode.MAX, 400_000, "<think>", True),
        ({}, ThinkMode.NONE, 32_768, "</think>", False),
    ],
)
def test_thinking_controls_and_flags(
    changes: dict[str, object], mode: ThinkMode | None, context: int, ending: str, max_prefix: bool
) -> None:
    rendered = render_chat_request(_body(**changes), mode=mode, context_size=context)
    assert rendered.endswith("<｜Assistant｜>" + ending)
    assert (MAX_PREFIX in rendered) is max_prefix


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "invalid chat request"),
        (b'{"messages": 3}', "invalid chat request"),
        (json.dumps({"messages": [], "reasoning_effort": "banana"}).encode(), "reasoning_effort"),
        (json.dumps({"messages": [], "think": "yes"}).encode(), "invalid chat request"),
    ],
)
def test_bad_request_bodies_get_a_one_line_error(body: bytes, message: str) -> None:
    with pytest.raises(ChatRequestError, match=message) as error:
        render_chat_request(body, mode=None, context_size=32_768)
    assert "\n" not in str(error.value)


USER = {"role": "user", "content": "hi"}
ASSISTANT = {"role": "assistant", "content": "hello"}


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        (
            [USER, {"role": "narrator", "content": "x"}],
            r"^messages\[1\]\.role: unknown role 'narrator'",
        ),
        ([{"role": "", "content": "x"}], None),  # an empty role is a missing one: user
        ([], r"^messages: empty"),
        ([{"role": "system", "content": "s"}], r"^messages: no user message to answer"),
        ([USER, ASSISTANT], r"^messages: nothing to answer after the final assistant turn"),
        ([USER, ASSISTANT, {"role": "system", "content": "s"}], r"nothing to answer"),
        ([ASSISTANT, USER], None),
        ([USER, ASSISTANT, {"role": "tool", "content": "r"}], None),
    ],
)
def test_unknown_roles_and_conversations_with_nothing_to_answer(
    messages: list[dict[str, str]], message: str | None
) -> None:
    body = json.dumps({"messages": messages}).encode()
    if message is None:
        assert render_chat_request(body, mode=None, context_size=32_768).endswith("<think>")
        return
    with pytest.raises(ChatRequestError, match=message) as error:
        render_chat_request(body, mode=None, context_size=32_768)
    assert error.value.param == "messages"


data = st.lists(
    st.one_of(
        st.sampled_from([*SPECIAL_STRINGS, TOOL_RESULT_CLOSE, FULL.param_close]),
        st.text(max_size=5),
    ),
    max_size=4,
).map("".join)


@settings(max_examples=80, deadline=None)
@given(
    system=data,
    user=data,
    reasoning=data,
    content=data,
    name=data.filter(bool),
    key=data,
    value=data,
    result=data,
    mode=st.sampled_from(ThinkMode),
)
def test_specials_come_only_from_structure_or_literal_user_data(
    system: str,
    user: str,
    reasoning: str,
    content: str,
    name: str,
    key: str,
    value: str,
    result: str,
    mode: ThinkMode,
) -> None:
    def conversation(
        s: str, u: str, r: str, c: str, n: str, k: str, v: str, t: str
    ) -> list[Message]:
        call = ToolCall(n, json.dumps({k: v}, ensure_ascii=False))
        return [
            SystemMessage(s),
            UserMessage(u),
            AssistantMessage(content=c, reasoning=r, tool_calls=(call,)),
            ToolResultMessage(t),
        ]

    rendered = render_chat(
        conversation(system, user, reasoning, content, name, key, value, result), (), mode
    )
    skeleton = render_chat(conversation("", "", "", "", "n", "", "", ""), (), mode)
    literal = [system, user, reasoning if mode.thinking else "", content, value, result]
    escaped = [escape_attribute(name), escape_attribute(key)]
    for special in SPECIAL_STRINGS:
        expected = skeleton.count(special) + sum(x.count(special) for x in literal + escaped)
        assert rendered.count(special) == expected, special
    # Data cannot close the wrapper it sits in: one structural close tag each, plus
    # whatever other (literal) fields quote.
    others = [system, user, reasoning if mode.thinking else "", content]
    assert rendered.count(TOOL_RESULT_CLOSE) == 1 + sum(
        x.count(TOOL_RESULT_CLOSE) for x in [*others, value]
    )
    assert rendered.count(FULL.param_close) == 1 + sum(
        x.count(FULL.param_close) for x in [*others, result]
    )
