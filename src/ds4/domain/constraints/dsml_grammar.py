"""The DSML tool-call block as a Lark grammar (docs/structured-outputs.md, the block of
docs/reference/chat-and-dsml.md §3.1–3.2), for llguidance's Lark dialect.

The grammar spells the block the way ds4 renders it: the full spelling, `\\n` between
tags, one invoke per call. A strict tool's parameters follow its JSON schema: its
declared properties in schema order, the required ones present; a plain string
property (no enum, pattern, format or length bound) is a `string="true"` raw body, a
string enum a choice of those raw bodies, and every other property a
`string="false"` JSON literal constrained by the property's schema (inlined with
`%json`, compact). A tool that is not strict gets the structure only: any parameter
names, raw or JSON bodies. Both decode to the same arguments the parser reads
(docs/reference/chat-and-dsml.md §3.4).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ds4.domain.chat import ToolSchema
from ds4.domain.dsml.syntax import FULL, escape_attribute, escape_param_text
from ds4.domain.errors import RequestError

# Inlined schemas are compact, as the DSML json literal is minified (§3.2).
COMPACT = {"whitespace_flexible": False}
_PLAIN_STRING_KEYS = frozenset({"type", "description", "title", "examples", "default"})
_ENUM_KEYS = frozenset({"enum", "type", "description", "title"})
# What a strict tool's top-level parameters schema may say: each property is a DSML
# parameter with its own inlined schema, and the object around them is the invoke, so
# object-level keywords beyond these have nothing to act on and are refused.
_OBJECT_KEYS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "$defs", "definitions",
        "description", "title", "$schema", "$id", "x-guidance",
    }
)  # fmt: skip


def lark_literal(text: str) -> str:
    """A Lark string literal (JSON's escapes; non-ASCII raw)."""
    return json.dumps(text, ensure_ascii=False)


def inline_json(schema: Mapping[str, object], defs: Mapping[str, object] | None = None) -> str:
    """`%json {...}` of `schema`, compact unless it says otherwise, carrying the root's
    definitions so its `$ref`s still resolve."""
    value = dict(schema)
    value.setdefault("x-guidance", COMPACT)
    for key, table in (defs or {}).items():
        value.setdefault(key, table)
    return "%json " + json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class CallableTool:
    """A declared tool as the grammar needs it."""

    name: str
    parameters: Mapping[str, object]  # its arguments' JSON schema ({} when none)
    strict: bool
    param: str  # the request field, for refusals


def callable_tools(schemas: Sequence[ToolSchema], strict_all: bool) -> list[CallableTool]:
    """The tools of a request, read back from their canonical lines: `parameters`
    (OpenAI, Responses) or `input_schema` (Anthropic); strict when the tool says
    `strict: true` or the server makes every tool strict."""
    tools = []
    for index, schema in enumerate(schemas):
        definition = json.loads(schema.line)
        parameters = definition.get("parameters") or definition.get("input_schema") or {}
        if not isinstance(parameters, Mapping):
            raise RequestError(f"tools[{index}]: parameters must be a JSON object", param="tools")
        strict = definition.get("strict") is True or strict_all
        tools.append(CallableTool(schema.name, parameters, strict, f"tools[{index}]"))
    return tools


class _Rules:
    """Lark rules, named in order of creation."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0

    def add(self, prefix: str, body: str) -> str:
        self.count += 1
        name = f"{prefix}_{self.count}"
        self.lines.append(f"{name}: {body}")
        return name


def _param_head(key: str, string: bool) -> str:
    flag = "true" if string else "false"
    return lark_literal(f'{FULL.param_open} name="{escape_attribute(key)}" string="{flag}">')


_CLOSE_PARAM = lark_literal(FULL.param_close + "\n")
_RAW_BODY = "raw_body"  # a string body up to and including the parameter's close tag


def _is_plain_string(schema: Mapping[str, object]) -> bool:
    return schema.get("type") == "string" and set(schema) <= _PLAIN_STRING_KEYS


def _string_enum(schema: Mapping[str, object]) -> list[str] | None:
    values = schema.get("enum")
    if schema.get("type") not in (None, "string") or not isinstance(values, list) or not values:
        return None
    if not all(isinstance(v, str) for v in values) or set(schema) - _ENUM_KEYS:
        return None
    return [str(v) for v in values]


def _strict_param(
    rules: _Rules, key: str, schema: object, defs: Mapping[str, object], where: str
) -> str:
    if not isinstance(schema, Mapping):
        raise RequestError(f"{where}: property {key!r} has no schema object", param="tools")
    if _is_plain_string(schema):
        return rules.add("param", f'{_param_head(key, True)} {_RAW_BODY} "\\n"')
    choices = _string_enum(schema)
    if choices is not None:
        bodies = " | ".join(lark_literal(escape_param_text(v)) for v in choices)
        return rules.add("param", f"{_param_head(key, True)} ({bodies}) {_CLOSE_PARAM}")
    body = inline_json(schema, defs)
    return rules.add("param", f"{_param_head(key, False)} {body} {_CLOSE_PARAM}")


def _strict_params(rules: _Rules, tool: CallableTool) -> str:
    schema = tool.parameters
    properties = schema.get("properties")
    if schema.get("type", "object") != "object" or not isinstance(properties, Mapping):
        raise RequestError(
            f"{tool.param}: a strict tool's parameters must be an object schema with 'properties'",
            param="tools",
        )
    extra = sorted(set(schema) - _OBJECT_KEYS)
    if extra:
        raise RequestError(
            f"{tool.param}: keyword {extra[0]!r} of a strict tool's parameters is not "
            "supported (each property is constrained on its own)",
            param="tools",
        )
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    unknown = needed - set(properties)
    if unknown:
        raise RequestError(
            f"{tool.param}: required parameter {sorted(unknown)[0]!r} is not a property",
            param="tools",
        )
    defs = {k: v for k in ("$defs", "definitions") if isinstance(v := schema.get(k), Mapping)}
    parts = []
    for key, prop in properties.items():
        rule = _strict_param(rules, str(key), prop, defs, tool.param)
        parts.append(rule if key in needed else f"{rule}?")
    return " ".join(parts) if parts else '""'


_GENERIC = (
    f"generic_param: {lark_literal(FULL.param_open + ' name=' + chr(34))} PARAM_NAME "
    f'"\\" string=\\"" ("true\\">" {_RAW_BODY} | "false\\">" {inline_json({})} '
    f"{lark_literal(FULL.param_close)}) " + '"\\n"'
)
_SHARED = (
    f"{_RAW_BODY}[suffix={lark_literal(FULL.param_close)}]: /(?s:.*)/",
    'PARAM_NAME: /[^"<>&\\n]+/',
    _GENERIC,
)


def _invoke(rules: _Rules, tool: CallableTool) -> str:
    params = _strict_params(rules, tool) if tool.strict else "generic_param*"
    head = lark_literal(f'{FULL.invoke_open} name="{escape_attribute(tool.name)}">\n')
    return rules.add("invoke", f"{head} {params} {lark_literal(FULL.invoke_close + chr(10))}")


def calls_rule(tools: Sequence[CallableTool], *, parallel: bool) -> list[str]:
    """`calls`: what follows the block's open tag: one invoke (or several with
    `parallel`) of the given tools, then the close tag; with the rules it needs."""
    rules = _Rules()
    invokes = [_invoke(rules, tool) for tool in tools]
    rules.lines.append(f"invoke: {' | '.join(invokes)}")
    repeat = "invoke+" if parallel else "invoke"
    rules.lines.append(f'calls: "\\n" {repeat} {lark_literal(FULL.block_close)}')
    return [*rules.lines, *_SHARED]


BLOCK_OPEN = lark_literal(FULL.block_open)
# Free text that never opens a block (auto: the model may answer without a call).
FREE_TEXT = f"FREE_TEXT: /(?s:.*)/ & ~/(?s:.*){FULL.block_open}(?s:.*)/"
TEXT_THEN_BLOCK = f"text_then_open[suffix={BLOCK_OPEN}]: /(?s:.*)/"


def forced_call_lark(tools: Sequence[CallableTool], *, parallel: bool) -> str:
    """The reply is a block of calls (tool_choice required or a named tool)."""
    start = f'start: "\\n\\n"? {BLOCK_OPEN} calls'
    return "\n".join([start, *calls_rule(tools, parallel=parallel)])


def optional_call_lark(
    tools: Sequence[CallableTool], *, parallel: bool, answer: str | None = None
) -> str:
    """Text (or `answer`, a rule body such as an inlined schema) with no call, or
    text then a block of calls (tool_choice auto with strict tools or one call)."""
    if answer is None:
        start = "start: FREE_TEXT | text_then_open calls"
        extra = [FREE_TEXT, TEXT_THEN_BLOCK]
    else:
        start = f'start: answer | "\\n\\n"? {BLOCK_OPEN} calls'
        extra = [f"answer: {answer}"]
    return "\n".join([start, *extra, *calls_rule(tools, parallel=parallel)])
