"""Structured outputs and tool_choice with real clients on loopback, against `ds4 server`
on the shipped demo model (cpu backend, in-process: tests/integration/server/live_server.py).

The openai SDK's `chat.completions.parse` and `responses.parse` with pydantic models
return parsed objects, greedy and sampled; a budget too small ends in `length`, which
the SDK reports as it does for OpenAI; the anthropic SDK's tool_choice any / tool
forces a call; an unsupported schema keyword is each API's 400 naming it; a stream
says what the reply says. The schemas keep every value bounded (enums, bounded
numbers, short strings, short arrays), so even a tiny model reaches the end of the
JSON inside a small budget.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import anthropic
import httpx
import jsonschema  # type: ignore[import-untyped]
import openai
import pydantic
import pytest
from pydantic import BaseModel, ConfigDict, Field
from tests.integration.server.live_server import LiveServer, live_server
from tools.demo.files import DEMO


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp: Path = tmp_path_factory.mktemp("structured")
    with live_server(tmp, [], model=str(DEMO), backend="cpu") as srv:
        yield srv


@pytest.fixture
def oai(server: LiveServer) -> Any:
    return openai.OpenAI(base_url=server.base, api_key="unused", max_retries=0)


# ---- twenty schemas ---------------------------------------------------------


class Strict(BaseModel):
    """No members beyond the declared ones (OpenAI's strict mode says the same): an
    open object would let a rambling model invent keys forever."""

    model_config = ConfigDict(extra="forbid")


class Color(StrEnum):
    RED = "red"
    GREEN = "green"


class Flag(Strict):
    ok: bool


class Digit(Strict):
    value: int = Field(ge=0, le=9)


class Score(Strict):
    score: float = Field(ge=0, le=1, multiple_of=0.25)  # bounded digits too


class Paint(Strict):
    color: Color


class Mood(Strict):
    mood: Literal["happy", "sad", "calm"]


class Word(Strict):
    word: str = Field(max_length=6)


class Point(Strict):
    x: int = Field(ge=-3, le=3)
    y: int = Field(ge=-3, le=3)


class Bits(Strict):
    bits: list[bool] = Field(max_length=3)


class Grid(Strict):
    # Both levels bounded: an unbounded inner row let a sampled reply (Responses has
    # no seed) run past the budget.
    rows: list[Annotated[list[Literal[0, 1]], Field(max_length=3)]] = Field(max_length=2)


class Tags(Strict):
    tags: list[Literal["a", "b", "c"]] = Field(min_length=1, max_length=2)


class Nested(Strict):
    point: Point
    flag: Flag


class Maybe(Strict):
    note: Literal["yes", "no"] | None


class Temperature(Strict):
    celsius: int = Field(ge=-40, le=50)
    unit: Literal["C"]


class Ratio(Strict):
    num: int = Field(ge=1, le=5)
    den: int = Field(ge=1, le=5)


class Paints(Strict):
    colors: list[Color] = Field(max_length=2)


class Items(Strict):
    items: list[Digit] = Field(max_length=2)


class Deep(Strict):
    nested: Nested
    mood: Mood


class Answer(Strict):
    answer: Literal["yes", "no"]
    confidence: float = Field(ge=0, le=1, multiple_of=0.125)


class Code(Strict):
    code: str = Field(pattern="^[A-C][0-9]$")


SCHEMAS: list[type[BaseModel]] = [
    Flag, Digit, Score, Paint, Mood, Word, Point, Bits, Grid, Tags,
    Nested, Maybe, Temperature, Ratio, Paints, Items, Deep, Answer, Code, Nested,
]  # fmt: skip
FAST = [Digit, Grid, Nested, Code]
MESSAGES = [{"role": "user", "content": "Rispondi in JSON."}]
SAMPLING: dict[str, dict[str, Any]] = {
    "greedy": {"temperature": 0},
    "sampled": {"temperature": 1.0, "seed": 11},
}


def _check_parsed(model: type[BaseModel], parsed: BaseModel | None, text: str | None) -> None:
    assert isinstance(parsed, model), text
    jsonschema.validate(json.loads(text or ""), model.model_json_schema())


def _chat_parse(oai: Any, model: type[BaseModel], sampling: dict[str, Any]) -> None:
    reply = oai.chat.completions.parse(
        model="deepseek-chat",  # thinking off: the reply is the JSON
        messages=MESSAGES,
        response_format=model,
        max_tokens=96,
        **sampling,
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "stop"
    _check_parsed(model, choice.message.parsed, choice.message.content)


def _responses_parse(oai: Any, model: type[BaseModel], sampling: dict[str, Any]) -> None:
    reply = oai.responses.parse(
        model="deepseek-v4-flash",
        input="Rispondi in JSON.",
        text_format=model,
        reasoning={"effort": "none"},
        max_output_tokens=96,
        temperature=sampling["temperature"],
    )
    assert reply.status == "completed"
    _check_parsed(model, reply.output_parsed, reply.output_text)


@pytest.mark.parametrize("kind", SAMPLING)
@pytest.mark.parametrize("model", FAST, ids=lambda m: m.__name__)
def test_chat_parse_returns_the_pydantic_object(
    oai: Any, model: type[BaseModel], kind: str
) -> None:
    _chat_parse(oai, model, SAMPLING[kind])


@pytest.mark.parametrize("kind", SAMPLING)
@pytest.mark.parametrize("model", FAST, ids=lambda m: m.__name__)
def test_responses_parse_returns_the_pydantic_object(
    oai: Any, model: type[BaseModel], kind: str
) -> None:
    _responses_parse(oai, model, SAMPLING[kind])


@pytest.mark.slow
@pytest.mark.parametrize("kind", SAMPLING)
@pytest.mark.parametrize("model", SCHEMAS, ids=lambda m: m.__name__)
def test_twenty_schemas_parse_on_chat_and_responses(
    oai: Any, model: type[BaseModel], kind: str
) -> None:
    _chat_parse(oai, model, SAMPLING[kind])
    _responses_parse(oai, model, SAMPLING[kind])


def test_a_budget_too_small_ends_in_length_as_openai_does(oai: Any) -> None:
    with pytest.raises(openai.LengthFinishReasonError):
        oai.chat.completions.parse(
            model="deepseek-chat", messages=MESSAGES, response_format=Deep, max_tokens=3,
            temperature=0,
        )  # fmt: skip


def test_with_thinking_the_json_follows_the_reasoning(server: LiveServer) -> None:
    body = {
        "messages": MESSAGES,
        "max_tokens": 400,
        "seed": 5,
        "response_format": {"type": "json_object"},
    }
    reply = httpx.post(server.base + "/chat/completions", json=body, timeout=120).json()
    choice = reply["choices"][0]
    if choice["finish_reason"] == "length":
        pytest.skip("the demo model kept reasoning past the budget")
    assert isinstance(json.loads(choice["message"]["content"]), dict)


def test_completions_response_format_and_the_grammar_field(server: LiveServer) -> None:
    body: dict[str, Any] = {
        "prompt": "Sì o no?",
        "model": "deepseek-chat",
        "max_tokens": 8,
        "grammar": {"syntax": "regex", "definition": "(sì|no)!"},
    }
    reply = httpx.post(server.base + "/completions", json=body, timeout=60).json()
    assert reply["choices"][0]["text"] in ("sì!", "no!")
    gbnf = {**body, "grammar": 'root ::= "ok" [0-9]'}
    text = httpx.post(server.base + "/completions", json=gbnf, timeout=60).json()
    assert text["choices"][0]["text"][:2] == "ok"


def test_stream_equals_the_reply(server: LiveServer) -> None:
    schema = Deep.model_json_schema()
    body = {
        "model": "deepseek-chat",
        "messages": MESSAGES,
        "max_tokens": 96,
        "temperature": 1.0,
        "seed": 3,
        "response_format": {"type": "json_schema", "json_schema": {"name": "d", "schema": schema}},
    }
    plain = httpx.post(server.base + "/chat/completions", json=body, timeout=60).json()
    content = plain["choices"][0]["message"]["content"]
    streamed = ""
    with httpx.stream(
        "POST", server.base + "/chat/completions", json={**body, "stream": True}, timeout=60
    ) as reply:
        for line in reply.iter_lines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:])["choices"]:
                    streamed += choice["delta"].get("content") or ""
    assert streamed == content
    jsonschema.validate(json.loads(content), schema)


# ---- refusals --------------------------------------------------------------

BAD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}},
    "dependentRequired": {"a": ["b"]},
}


@pytest.mark.parametrize(
    ("path", "body", "param", "anthropic_shape"),
    [
        (
            "/chat/completions",
            {
                "messages": MESSAGES,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": BAD_SCHEMA},
                },
            },
            "response_format",
            False,
        ),
        (
            "/completions",
            {
                "prompt": "x",
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": BAD_SCHEMA},
                },
            },
            "response_format",
            False,
        ),
        (
            "/responses",
            {
                "input": "x",
                "text": {"format": {"type": "json_schema", "name": "x", "schema": BAD_SCHEMA}},
            },
            "text.format",
            False,
        ),
        (
            "/messages",
            {
                "max_tokens": 9,
                "messages": MESSAGES,
                "tools": [{"name": "t", "input_schema": BAD_SCHEMA}],
                "tool_choice": {"type": "any"},
            },
            None,
            True,
        ),
    ],
)
def test_an_unsupported_schema_keyword_is_a_400_naming_it(
    server: LiveServer, path: str, body: dict[str, Any], param: str | None, anthropic_shape: bool
) -> None:
    if anthropic_shape:
        body = {**body, "tools": [{**body["tools"][0], "strict": True}]}
    reply = httpx.post(server.base + path, json=body, timeout=30)
    assert reply.status_code == 400, reply.text
    data = reply.json()
    if anthropic_shape:
        assert data["type"] == "error" and data["error"]["type"] == "invalid_request_error"
        assert "dependentRequired" in data["error"]["message"]
    else:
        assert "dependentRequired" in data["error"]["message"]
        assert data["error"]["param"] == param


# ---- tool_choice -----------------------------------------------------------

WEATHER = {
    "name": "get_weather",
    "description": "the weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {
            "city": {"enum": ["Roma", "Milano"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "days"],
    },
}
OTHER = {"name": "noop", "input_schema": {"type": "object", "properties": {}}}


@pytest.mark.parametrize(
    ("choice", "name"),
    [({"type": "any"}, None), ({"type": "tool", "name": "noop"}, "noop")],
)
def test_anthropic_tool_choice_forces_a_call(
    server: LiveServer, choice: dict[str, str], name: str | None
) -> None:
    claude: Any = anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0)
    reply = claude.messages.create(
        model="deepseek-chat",
        max_tokens=120,
        messages=[{"role": "user", "content": "Che tempo fa?"}],
        tools=[{**WEATHER, "strict": True}, OTHER],
        tool_choice=choice,
        extra_body={"temperature": 0},
    )
    assert reply.stop_reason == "tool_use"
    calls = [block for block in reply.content if block.type == "tool_use"]
    assert calls and (name is None or all(call.name == name for call in calls))
    for call in calls:
        if call.name == "get_weather":
            jsonschema.validate(call.input, WEATHER["input_schema"])


def test_chat_required_with_one_call_gives_exactly_one_schema_valid_call(oai: Any) -> None:
    tool = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": WEATHER["input_schema"], "strict": True},
    }
    reply = oai.chat.completions.create(
        model="deepseek-chat",
        messages=[{"role": "user", "content": "Che tempo fa?"}],
        tools=[tool],
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=120,
        temperature=0,
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    jsonschema.validate(json.loads(call.function.arguments), WEATHER["input_schema"])


def test_responses_named_tool_choice_forces_that_tool(oai: Any) -> None:
    reply = oai.responses.create(
        model="deepseek-v4-flash",
        input="Che tempo fa?",
        reasoning={"effort": "none"},
        tools=[
            {
                "type": "function",
                "name": "get_weather",
                "parameters": WEATHER["input_schema"],
                "strict": True,
            },
            {
                "type": "function",
                "name": "noop",
                "parameters": {"type": "object", "properties": {}},
            },
        ],
        tool_choice={"type": "function", "name": "get_weather"},
        max_output_tokens=120,
        temperature=0,
    )
    calls = [item for item in reply.output if item.type == "function_call"]
    assert calls and all(call.name == "get_weather" for call in calls)


def test_pydantic_is_the_validator_the_sdk_uses() -> None:
    """The schemas above are what the SDK sends: pydantic's strict JSON schema."""
    with pytest.raises(pydantic.ValidationError):
        Digit.model_validate({"value": 12})
