"""Issue 14 item 8 at the unit level: the body scan's limits and duplicate check, lazy
decoding (once), and the prompt bound that refuses a hopeless prompt untokenized."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from tests.unit.generation.byte_tokenizer import ByteTokenizer

from ds4.domain.errors import ContextLengthError, RequestError
from ds4.domain.serving.exchange import Api
from ds4.domain.serving.prepare import longest_token_bytes, prepare_job, tokens_at_least
from ds4.domain.tools import ToolReplayMemory
from ds4.wire.anthropic import count_tokens_body, parse_messages
from ds4.wire.apis import openai_error_body
from ds4.wire.chat import parse_chat_completion
from ds4.wire.completions import parse_completion
from ds4.wire.replies import http_status
from ds4.wire.requests import MAX_VALUES, InvalidJsonError, decode_body, present, scan_json
from ds4.wire.responses_request import parse_responses


class CountingRandom:
    def token_bytes(self, n: int) -> bytes:
        return bytes(n)


def scan(body: bytes) -> tuple[bool, bool, bool]:
    shape = scan_json(body, max_depth=8, max_values=20)
    return shape.too_deep, shape.too_many_values, shape.duplicate_content


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"content": 1, "content": 2}', (False, False, True)),
        (b'{"content": 1, "x": {"content": 2}}', (False, False, False)),  # other object
        (b'[{"content": 1}, {"content": 2}]', (False, False, False)),
        (b'{"\\u0063ontent": 1, "content": 2}', (False, False, True)),  # the same key
        (b'{"a": "\\"content\\": 1, \\"content\\": 2"}', (False, False, False)),  # a string
        (b"[" * 9 + b"]" * 9, (True, False, False)),
        (b"[" + b"0," * 20 + b"0]", (False, True, False)),
        (b'["' + b"x" * 10_000 + b'"]', (False, False, False)),  # one value, however long
    ],
)
def test_scan(body: bytes, expected: tuple[bool, bool, bool]) -> None:
    assert scan(body) == expected


def test_too_many_values_is_a_400_before_decoding() -> None:
    body = b'{"messages": [' + b"{}," * MAX_VALUES + b"{}]}"
    with pytest.raises(RequestError) as caught:
        parse_chat_completion(body)
    assert http_status(caught.value.kind) == 400
    assert f"more than {MAX_VALUES} values" in caught.value.message


class _Body(msgspec.Struct):
    a: object = msgspec.UNSET
    b: str | None = None
    zz: object = msgspec.UNSET


@pytest.mark.parametrize(
    ("bad", "detail"),
    [
        (b'{"b": "\\ud800"}', None),  # a lone surrogate
        (b"[1, 2]", "the body must be a JSON object"),
        (b' \n"text"', "the body must be a JSON object"),
        (b'{"a": NaN}', None),
        (b'{"b": 3}', "Expected `str | null`, got `int` - at `$.b`"),
        (b'{"a": {"content": 1, "content": 2}}', "duplicate 'content' member"),
    ],
)
def test_bad_bodies_are_400_naming_the_problem(bad: bytes, detail: str | None) -> None:
    with pytest.raises(InvalidJsonError) as caught:
        decode_body(bad, _Body)
    assert http_status(caught.value.kind) == 400
    assert caught.value.message == f"invalid JSON request: {caught.value.detail}"
    if detail is not None:
        assert caught.value.detail == detail


def test_a_body_decodes_into_its_struct_members_nobody_reads_are_skipped() -> None:
    body = decode_body(b'{"a": [1, 2], "b": "x", "other": {"deep": [true]}}', _Body)
    assert body.a == [1, 2] and body.b == "x"
    assert present(body.a) and not present(body.zz)
    assert present(decode_body(b'{"zz": null}', _Body).zz)  # sent as null is sent


CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}
BODIES = [
    (
        parse_chat_completion,
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"},
            ],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
            "thinking": {"type": "enabled"},
            "stop": ["x"],
            "n": 1,
        },
    ),
    (parse_completion, {"prompt": "hi", "thinking": False, "stop": "x", "best_of": 1}),
    (
        parse_messages,
        {
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "system": "s",
            "thinking": {"type": "adaptive"},
            "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            "stop_sequences": ["x"],
        },
    ),
    (
        parse_responses,
        {
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
            "tools": [{"type": "function", "name": "f", "parameters": {}}],
            "tool_choice": "auto",
            "reasoning": {"effort": "high"},
        },
    ),
]


@pytest.mark.parametrize(("parse", "fields"), BODIES, ids=lambda v: getattr(v, "__name__", ""))
def test_each_body_is_decoded_once(
    parse: Any, fields: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """msgspec reads the body's bytes once per request, whatever members it has (member
    values such as a call's arguments are views into those bytes, decoded on their own)."""
    body = json.dumps(fields).encode()
    decode = msgspec.json.decode
    whole: list[int] = []

    def counting(data: Any, *args: Any, **kwargs: Any) -> Any:
        if data is body:
            whole.append(1)
        return decode(data, *args, **kwargs)

    monkeypatch.setattr(msgspec.json, "decode", counting)
    parse(body)
    assert len(whole) == 1


def test_tokens_at_least() -> None:
    assert tokens_at_least("x" * 256, 128) == 2
    assert tokens_at_least("x" * 257, 128) == 3


class NoEncode(ByteTokenizer):
    def encode(self, text: str) -> list[int]:
        raise AssertionError("a prompt that cannot fit must not be tokenized")


def test_a_prompt_that_cannot_fit_is_refused_untokenized() -> None:
    tokenizer = NoEncode()
    longest = longest_token_bytes(tokenizer)
    ctx = 64
    content = "x" * (ctx * longest + 1)
    request = parse_chat_completion(
        json.dumps({"messages": [{"role": "user", "content": content}]}).encode()
    ).generation
    memory = ToolReplayMemory(CountingRandom())
    with pytest.raises(ContextLengthError) as caught:
        prepare_job(request, tokenizer, memory, ctx, longest_token=longest)
    error = json.loads(openai_error_body(caught.value, Api.CHAT))["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert error["message"].startswith("Prompt has at least ")
    assert error["n_ctx"] == ctx and error["n_prompt_tokens"] >= ctx
    body = json.dumps({"messages": [{"role": "user", "content": content}]}).encode()
    with pytest.raises(RequestError):
        count_tokens_body(body, tokenizer, ctx, longest)
