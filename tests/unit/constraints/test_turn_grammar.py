"""Which grammar a turn gets (domain/constraints/turn.py) and the wire readers of the
fields that ask for one (wire/constraints.py)."""

from __future__ import annotations

import json

import pytest

from ds4.domain.chat import tool_schema
from ds4.domain.constraints.request import AUTO, OutputFormat, ToolChoice
from ds4.domain.constraints.turn import turn_grammar
from ds4.domain.errors import RequestError
from ds4.wire.constraints import (
    anthropic_tool_choice,
    grammar_field,
    one_format,
    openai_tool_choice,
    response_format,
    text_format,
)

WEATHER = {
    "name": "weather",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
}
STRICT = {**WEATHER, "strict": True}
SCHEMA = OutputFormat("json_schema", '{"type": "object"}', "response_format")


def test_no_tools_and_no_format_is_unconstrained() -> None:
    assert turn_grammar(None, AUTO, ()) is None


def test_a_format_alone_is_its_grammar() -> None:
    grammar = turn_grammar(SCHEMA, AUTO, ())
    assert grammar is not None and grammar.kind == "json_schema"
    any_object = OutputFormat("json_object", "", "response_format").grammar()
    assert json.loads(any_object.source) == {"type": "object"}


def test_auto_with_tools_that_are_not_strict_stays_unconstrained() -> None:
    assert turn_grammar(None, AUTO, (tool_schema(WEATHER),)) is None


def test_a_strict_tool_or_the_server_flag_shapes_an_auto_turn() -> None:
    strict = turn_grammar(None, AUTO, (tool_schema(STRICT),))
    flagged = turn_grammar(None, AUTO, (tool_schema(WEATHER),), strict_all=True)
    for grammar in (strict, flagged):
        assert grammar is not None and grammar.kind == "lark"
        assert "FREE_TEXT" in grammar.source and '\\"city\\" string=\\"true\\"' in grammar.source


def test_one_call_only_shapes_an_auto_turn_too() -> None:
    grammar = turn_grammar(None, ToolChoice(parallel=False), (tool_schema(WEATHER),))
    assert grammar is not None and "invoke+" not in grammar.source


def test_required_forces_a_block_of_any_declared_tool() -> None:
    other = tool_schema({"name": "other", "parameters": {}})
    grammar = turn_grammar(None, ToolChoice("required"), (tool_schema(WEATHER), other))
    assert grammar is not None
    assert grammar.source.startswith('start: "\\n\\n"? "<｜DSML｜tool_calls>" calls')
    assert 'name=\\"weather\\"' in grammar.source and 'name=\\"other\\"' in grammar.source


def test_a_named_tool_forces_that_tool_only() -> None:
    other = tool_schema({"name": "other", "parameters": {}})
    grammar = turn_grammar(None, ToolChoice("named", "other"), (tool_schema(WEATHER), other))
    assert grammar is not None
    assert 'name=\\"other\\"' in grammar.source and "weather" not in grammar.source


@pytest.mark.parametrize(
    ("output", "choice", "tools", "message"),
    [
        (None, ToolChoice("required"), (), "forcing a call needs tools"),
        (None, ToolChoice("named", "nope"), (WEATHER,), "'nope' is not among"),
        (
            OutputFormat("regex", "a+", "grammar"),
            AUTO,
            (WEATHER,),
            "regex grammar cannot be combined with tools",
        ),
        (
            None,
            AUTO,
            ({"name": "bad", "parameters": {"type": "string"}, "strict": True},),
            "object schema",
        ),
    ],
)
def test_what_cannot_be_built_is_refused_by_field(
    output: OutputFormat | None,
    choice: ToolChoice,
    tools: tuple[dict[str, object], ...],
    message: str,
) -> None:
    with pytest.raises(RequestError, match=message):
        turn_grammar(output, choice, tuple(tool_schema(t) for t in tools))


def test_a_json_format_with_tools_is_the_schema_or_a_call() -> None:
    grammar = turn_grammar(SCHEMA, AUTO, (tool_schema(WEATHER),))
    assert grammar is not None and grammar.source.startswith("start: answer |")
    assert "%json" in grammar.source


# ---- wire readers ----------------------------------------------------------


def test_response_format_readers() -> None:
    assert response_format(None) is None
    assert response_format({"type": "text"}) is None
    assert response_format({"type": "json_object"}) == OutputFormat(
        "json_object", "", "response_format"
    )
    schema = response_format(
        {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    )
    assert schema is not None and json.loads(schema.source) == {"type": "object"}
    responses = text_format(
        {"format": {"type": "json_schema", "name": "x", "schema": {"type": "integer"}}}
    )
    assert responses is not None and responses.param == "text.format"
    with pytest.raises(RequestError, match="response_format: type 'yaml' is not supported"):
        response_format({"type": "yaml"})
    with pytest.raises(RequestError, match="needs a 'schema'"):
        response_format({"type": "json_schema", "json_schema": {"name": "x"}})


def test_grammar_field_reads_lark_gbnf_and_regex() -> None:
    assert grammar_field("start: /a+/") == OutputFormat("lark", "start: /a+/", "grammar")
    assert grammar_field('root ::= "a"') == OutputFormat("gbnf", 'root ::= "a"', "grammar")
    regex = grammar_field({"syntax": "regex", "definition": "a+"})
    assert regex == OutputFormat("regex", "a+", "grammar")
    with pytest.raises(RequestError, match="syntax 'ebnf'"):
        grammar_field({"syntax": "ebnf", "definition": "x"})
    with pytest.raises(RequestError, match="grammar: cannot be combined with response_format"):
        one_format(SCHEMA, OutputFormat("lark", "start: x", "grammar"))


def test_openai_tool_choice() -> None:
    assert openai_tool_choice(None) == AUTO
    assert openai_tool_choice("required", False) == ToolChoice("required", parallel=False)
    chat = openai_tool_choice({"type": "function", "function": {"name": "f"}})
    responses = openai_tool_choice({"type": "function", "name": "f"})
    assert chat == responses == ToolChoice("named", "f")
    with pytest.raises(RequestError, match="'sometimes' is not supported"):
        openai_tool_choice("sometimes")
    with pytest.raises(RequestError, match="parallel_tool_calls: must be a boolean"):
        openai_tool_choice("auto", "yes")


def test_anthropic_tool_choice() -> None:
    assert anthropic_tool_choice({"type": "any"}) == ToolChoice("required")
    named = anthropic_tool_choice({"type": "tool", "name": "f", "disable_parallel_tool_use": True})
    assert named == ToolChoice("named", "f", parallel=False)
    assert anthropic_tool_choice({"type": "none"}).mode == "none"
    with pytest.raises(RequestError, match="needs the tool's name"):
        anthropic_tool_choice({"type": "tool"})
