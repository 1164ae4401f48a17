"""The request fields that shape a reply (docs/structured-outputs.md), read the same
way on every API that has them: `response_format` (chat, completions), `text.format`
(Responses), the `grammar` extension (chat, completions, Responses; as llama-server's),
and `tool_choice` with `parallel_tool_calls` (chat, Responses) or Anthropic's
`tool_choice` with `disable_parallel_tool_use`.

Each reader takes the decoded member (None or msgspec.UNSET when absent) and returns
the domain value, or raises a RequestError naming the field; nothing is ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ds4.domain.constraints.request import AUTO, FormatKind, OutputFormat, ToolChoice
from ds4.domain.errors import RequestError
from ds4.wire.requests import present


def _refuse(param: str, message: str) -> RequestError:
    return RequestError(f"{param}: {message}", param=param)


def _schema_text(schema: object, param: str) -> str:
    if not isinstance(schema, Mapping):
        raise _refuse(param, "the schema must be a JSON object")
    return json.dumps(schema, ensure_ascii=False)


def _format(
    value: Mapping[str, object], param: str, schema_holder: str | None
) -> OutputFormat | None:
    """A `{"type": "text" | "json_object" | "json_schema", ...}` value; the schema sits
    under `schema_holder` (chat's `json_schema`) or in the value itself (Responses)."""
    kind = value.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return OutputFormat("json_object", "", param)
    if kind == "json_schema":
        holder = value.get(schema_holder) if schema_holder is not None else value
        where = f"{param}.{schema_holder}" if schema_holder is not None else param
        if not isinstance(holder, Mapping):
            raise _refuse(where, "must be an object with a 'schema'")
        schema = holder.get("schema")
        if schema is None:
            raise _refuse(where, "needs a 'schema'")
        return OutputFormat("json_schema", _schema_text(schema, f"{where}.schema"), param)
    raise _refuse(param, f"type {kind!r} is not supported (use text, json_object or json_schema)")


def response_format(value: object) -> OutputFormat | None:
    """Chat and completions `response_format`."""
    if not present(value) or value is None:
        return None
    if not isinstance(value, Mapping):
        raise _refuse("response_format", "must be an object")
    return _format(value, "response_format", "json_schema")


def text_format(value: object) -> OutputFormat | None:
    """Responses `text` (its `format`; `verbosity` and the rest are read elsewhere)."""
    if not present(value) or value is None:
        return None
    if not isinstance(value, Mapping):
        raise _refuse("text", "must be an object")
    fmt = value.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, Mapping):
        raise _refuse("text.format", "must be an object")
    return _format(fmt, "text.format", None)


def grammar_field(value: object) -> OutputFormat | None:
    """The `grammar` extension: a string is a Lark grammar, or GBNF when it holds a
    `::=` rule (llama-server's field); `{"syntax": "lark" | "regex" | "gbnf",
    "definition": "..."}` names the syntax."""
    if not present(value) or value is None:
        return None
    if isinstance(value, str):
        return OutputFormat("gbnf" if "::=" in value else "lark", value, "grammar")
    if not isinstance(value, Mapping):
        raise _refuse("grammar", "must be a string or an object with 'syntax' and 'definition'")
    syntax, definition = value.get("syntax"), value.get("definition")
    if syntax not in ("lark", "regex", "gbnf"):
        raise _refuse("grammar", f"syntax {syntax!r} is not supported (use lark, regex or gbnf)")
    if not isinstance(definition, str) or not definition:
        raise _refuse("grammar", "needs a non-empty string 'definition'")
    kinds: dict[object, FormatKind] = {"lark": "lark", "regex": "regex", "gbnf": "gbnf"}
    return OutputFormat(kinds[syntax], definition, "grammar")


def one_format(*formats: OutputFormat | None) -> OutputFormat | None:
    """At most one of the format fields may shape a reply."""
    given = [f for f in formats if f is not None]
    if len(given) > 1:
        raise _refuse(given[1].param, f"cannot be combined with {given[0].param}")
    return given[0] if given else None


def _parallel(value: object) -> bool:
    if value is None or not present(value):
        return True
    if not isinstance(value, bool):
        raise _refuse("parallel_tool_calls", "must be a boolean")
    return value


def openai_tool_choice(value: object, parallel_tool_calls: object = None) -> ToolChoice:
    """Chat and Responses: "auto" | "none" | "required", or a named function:
    chat's `{"type": "function", "function": {"name": ...}}`, Responses'
    `{"type": "function", "name": ...}`."""
    parallel = _parallel(parallel_tool_calls)
    if value is None or not present(value) or value == "auto":
        return ToolChoice("auto", parallel=parallel)
    if value in ("none", "required"):
        return ToolChoice("none" if value == "none" else "required", parallel=parallel)
    if isinstance(value, Mapping) and value.get("type") == "function":
        function = value.get("function")
        name = function.get("name") if isinstance(function, Mapping) else value.get("name")
        if isinstance(name, str) and name:
            return ToolChoice("named", name, parallel=parallel)
        raise _refuse("tool_choice", "a function choice needs the function's 'name'")
    shown = value.get("type") if isinstance(value, Mapping) else value
    raise _refuse(
        "tool_choice",
        f"{shown!r} is not supported (use auto, none, required or a function)",
    )


def anthropic_tool_choice(value: object) -> ToolChoice:
    """`{"type": "auto" | "any" | "tool" | "none", "name", "disable_parallel_tool_use"}`."""
    if value is None or not present(value):
        return AUTO
    if not isinstance(value, Mapping):
        raise _refuse("tool_choice", "must be an object")
    disable = value.get("disable_parallel_tool_use", False)
    if not isinstance(disable, bool):
        raise _refuse("tool_choice.disable_parallel_tool_use", "must be a boolean")
    kind = value.get("type")
    parallel = not disable
    if kind in ("auto", "none"):
        return ToolChoice("auto" if kind == "auto" else "none", parallel=parallel)
    if kind == "any":
        return ToolChoice("required", parallel=parallel)
    if kind == "tool":
        name = value.get("name")
        if not isinstance(name, str) or not name:
            raise _refuse("tool_choice.name", "a tool choice needs the tool's name")
        return ToolChoice("named", name, parallel=parallel)
    raise _refuse("tool_choice", f"type {kind!r} is not supported (use auto, any, tool or none)")
