"""The llguidance adapter over a byte vocabulary, and decode_turn with a constraint on
a fake model whose logits are random: every completed output matches its schema
(jsonschema), the same seed gives the same output, reasoning is left free and the
constraint starts after `</think>`, a DSML grammar gives a well-formed call."""

from __future__ import annotations

import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.fake_compute import FakeComputeSession, Scripted
from tests.unit.generation.byte_tokenizer import VOCAB, ByteTokenizer

from ds4.adapters.constraint.llguidance import LlguidanceCompiler, lltokenizer
from ds4.domain.chat import tool_schema
from ds4.domain.constraints.request import ToolChoice
from ds4.domain.constraints.turn import turn_grammar
from ds4.domain.engine.session import EngineSession
from ds4.domain.generation.events import Finished
from ds4.domain.generation.loop import TurnSettings, generate
from ds4.domain.sampling import SamplingParams, allowed_ids
from ds4.ports.constraint import Grammar, GrammarError

TOKENIZER = ByteTokenizer()
COMPILER = LlguidanceCompiler(TOKENIZER)
EOS = TOKENIZER.special.eos
PROMPT = TOKENIZER.encode("<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>")


def schema_grammar(schema: dict[str, Any]) -> Grammar:
    return Grammar("json_schema", json.dumps(schema), "response_format")


def decode(
    grammar: Grammar, seed: int, *, temperature: float = 1.0, max_tokens: int = 300, **kw: Any
) -> Finished:
    compute = FakeComputeSession(vocab=VOCAB, ctx=1024, script=kw.pop("script", None))
    session = EngineSession(compute)
    settings_ = TurnSettings(
        sampling=SamplingParams(temperature=temperature, min_p=0.0, seed=seed),
        max_tokens=max_tokens,
        constraint=COMPILER.compile(grammar),
        **kw,
    )
    events = list(generate(session, PROMPT, TOKENIZER, settings_))
    done = events[-1]
    assert isinstance(done, Finished)
    return done


def test_the_vocabulary_is_built_once_per_tokenizer() -> None:
    assert lltokenizer(TOKENIZER) is lltokenizer(TOKENIZER)
    assert lltokenizer(ByteTokenizer()) is not lltokenizer(TOKENIZER)


def test_the_first_mask_allows_only_what_starts_the_grammar() -> None:
    constraint = COMPILER.compile(Grammar("regex", "(yes|no)", "grammar"))
    allowed = np.flatnonzero(allowed_ids(constraint.allowed(), VOCAB)).tolist()
    assert allowed == [ord("n"), ord("y")]
    assert constraint.advance(ord("n")) and not constraint.complete
    assert not constraint.advance(ord("x"))  # refused: the constraint is broken


def test_eos_is_allowed_only_once_the_grammar_is_complete() -> None:
    constraint = COMPILER.compile(Grammar("regex", "ab", "grammar"))
    for token in b"ab":
        assert not allowed_ids(constraint.allowed(), VOCAB)[EOS]
        constraint.advance(token)
    assert constraint.complete
    assert np.flatnonzero(allowed_ids(constraint.allowed(), VOCAB)).tolist() == [EOS]


@pytest.mark.parametrize(
    ("grammar", "reason"),
    [
        (
            schema_grammar({"type": "object", "dependentRequired": {"a": ["b"]}}),
            "dependentRequired",
        ),
        (schema_grammar({"type": "string", "format": "telepathy"}), "Unknown format: telepathy"),
        (schema_grammar({"type": "string", "pattern": "(?=a)"}), "regex parse error"),
        (schema_grammar({"$ref": "#/nowhere"}), "/nowhere"),
        (Grammar("lark", "start: (", "grammar"), "grammar"),
    ],
)
def test_what_llguidance_cannot_compile_is_a_grammar_error_naming_it(
    grammar: Grammar, reason: str
) -> None:
    with pytest.raises(GrammarError, match=reason) as caught:
        COMPILER.compile(grammar)
    assert caught.value.param == grammar.param


SCHEMAS = [
    {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": -5, "maximum": 5}},
        "required": ["n"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {"c": {"enum": ["red", "green", "blue"]}, "ok": {"type": "boolean"}},
        "required": ["c", "ok"],
        "additionalProperties": False,
    },
    {
        "type": "array",
        "items": {"type": "array", "items": {"enum": [1, 2, 3]}, "maxItems": 2},
        "maxItems": 2,
    },
    {
        "type": "object",
        "properties": {"x": {"type": "number", "minimum": 0, "maximum": 1}},
        "required": ["x"],
        "additionalProperties": False,
    },
]


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_decoded_json_matches_its_schema_greedy_and_sampled(
    schema: dict[str, Any], temperature: float
) -> None:
    done = decode(schema_grammar(schema), seed=7, temperature=temperature, max_tokens=600)
    if done.finish == "length":
        pytest.skip("the random model did not finish within the budget")
    assert done.finish == "stop"
    jsonschema.validate(json.loads(done.content), schema)


def _leaf() -> st.SearchStrategy[dict[str, Any]]:
    bounded = st.tuples(st.integers(-50, 50), st.integers(0, 50)).map(
        lambda lo_span: {"type": "integer", "minimum": lo_span[0], "maximum": sum(lo_span)}
    )
    enums = st.lists(st.text("abcxyz", min_size=1, max_size=4), min_size=1, max_size=4, unique=True)
    return st.one_of(
        bounded,
        enums.map(lambda values: {"enum": values}),
        st.just({"type": "boolean"}),
        st.just({"type": "string", "maxLength": 4}),
        st.just({"type": "null"}),
    )


def _schema() -> st.SearchStrategy[dict[str, Any]]:
    def objects(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        members = st.dictionaries(
            st.text("abcdefgh", min_size=1, max_size=3), children, min_size=1, max_size=3
        )
        return st.one_of(
            members.map(
                lambda props: {
                    "type": "object",
                    "properties": props,
                    "required": sorted(props),
                    "additionalProperties": False,
                }
            ),
            children.map(lambda item: {"type": "array", "items": item, "maxItems": 3}),
        )

    return st.recursive(_leaf(), objects, max_leaves=5)


@settings(max_examples=40, deadline=None)
@given(_schema(), st.integers(1, 2**40), st.sampled_from([0.0, 0.7, 1.5]))
def test_property_every_completed_output_validates_and_a_seed_repeats(
    schema: dict[str, Any], seed: int, temperature: float
) -> None:
    grammar = schema_grammar(schema)
    done = decode(grammar, seed, temperature=temperature, max_tokens=400)
    if done.finish == "length":
        return  # only completed outputs are promised to validate
    assert done.finish == "stop", done
    jsonschema.validate(json.loads(done.content), schema)
    assert decode(grammar, seed, temperature=temperature, max_tokens=400).content == done.content


def test_with_thinking_the_constraint_starts_after_think_close() -> None:
    said = TOKENIZER.encode("not json at all </think>".replace(" </think>", "</think>"))
    steps = [Scripted(t, 50.0) for t in said]

    def script(history: Any) -> Scripted | None:
        at = len(history) - len(PROMPT)
        return steps[at] if 0 <= at < len(steps) else None

    done = decode(Grammar("regex", "(yes|no)", "grammar"), 3, thinking=True, script=script)
    assert done.reasoning == "not json at all"
    assert done.content in ("yes", "no") and done.finish == "stop"


def test_a_forced_call_is_a_well_formed_call_with_schema_arguments() -> None:
    tool = {
        "name": "weather",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"enum": ["rome", "oslo"]},  # a raw string body would ramble here
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "unit": {"enum": ["c", "f"]},
            },
            "required": ["city", "days", "unit"],
        },
    }
    grammar = turn_grammar(None, ToolChoice("required", parallel=False), (tool_schema(tool),))
    assert grammar is not None
    for seed in (1, 2, 3):
        done = decode(grammar, seed, tools_active=True, max_tokens=600)
        assert done.finish == "tool_calls", done.text
        (call,) = done.tool_calls
        assert call.name == "weather"
        jsonschema.validate(json.loads(call.arguments), tool["parameters"])
