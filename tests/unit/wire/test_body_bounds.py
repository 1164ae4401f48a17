"""Issue 14 item 8 at the unit level: the body scan's limits and duplicate check, lazy
member decoding, and the prompt bound that refuses a hopeless prompt untokenized."""

from __future__ import annotations

import json

import pytest
from tests.unit.generation.byte_tokenizer import ByteTokenizer

from ds4.domain.errors import ContextLengthError, RequestError
from ds4.domain.serving.generation_request import Api
from ds4.domain.serving.prepare import prepare_job
from ds4.domain.serving.prompt_bound import longest_token_bytes, tokens_at_least
from ds4.domain.tools.replay_memory import ToolReplayMemory
from ds4.wire.chat_request import parse_chat_completion
from ds4.wire.count_tokens import count_tokens_body
from ds4.wire.errors import http_status, openai_error_body
from ds4.wire.json_body import MAX_VALUES, decode_object
from ds4.wire.json_scan import scan_json


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


def test_members_decode_on_demand_and_bad_bodies_are_400() -> None:
    obj = decode_object(b'{"a": [1, 2], "b": "x"}')
    assert "a" in obj and obj.get("a") == [1, 2] and obj.get("zz") is None
    for bad in (b'{"b": "\\ud800"}', b"[1, 2]", b'{"a": NaN}'):
        with pytest.raises(RequestError) as caught:
            decode_object(bad)
        assert http_status(caught.value.kind) == 400 and caught.value.message.startswith(
            "invalid JSON"
        )


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
    )
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
