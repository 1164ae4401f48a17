"""Responses freeform custom tools (`{"type":"custom","name","description","format"}`),
ADR 0043.

DeepSeek V4 only knows JSON-schema functions and DSML, so a custom tool is shown to
it as a function with one string parameter named `arguments` (the name
docs/reference/chat-and-dsml.md §3.2 already gives a call whose arguments are not a JSON object, so
a replayed `custom_tool_call` renders exactly as the model writes a fresh one), its format
(free text or a lark/regex grammar) spelled out in that parameter's description.
A call's freeform `input` travels as that one string member and is taken back out
for the `custom_tool_call` output item.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from ds4.domain.dsml.syntax import object_members, parse_json
from ds4.wire.json_body import InvalidJsonError

INPUT_PARAMETER = "arguments"
FREEFORM = "The raw input as plain text (not JSON)."
_SYNTAXES = ("lark", "regex")


def _refuse(what: str) -> InvalidJsonError:
    return InvalidJsonError(f"custom tool {what}")


def _format_hint(value: object) -> str:
    if value is None:
        return FREEFORM
    if not isinstance(value, Mapping):
        raise _refuse("format must be an object")
    kind = value.get("type")
    if kind == "text":
        return FREEFORM
    if kind != "grammar":
        raise _refuse(f"format type {kind!r} is not supported (use 'text' or 'grammar')")
    syntax, definition = value.get("syntax"), value.get("definition")
    if syntax not in _SYNTAXES:
        raise _refuse(f"grammar syntax {syntax!r} is not supported (use 'lark' or 'regex')")
    if not isinstance(definition, str) or not definition:
        raise _refuse("grammar needs a non-empty string 'definition'")
    return f"{FREEFORM} It must match this {syntax} grammar:\n{definition}"


def custom_tool_definition(tool: Mapping[str, object]) -> dict[str, object]:
    """The function the model sees for a custom tool (InvalidJsonError on a bad one)."""
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise _refuse("needs a non-empty string 'name'")
    description = tool.get("description")
    if description is not None and not isinstance(description, str):
        raise _refuse(f"{name!r}: 'description' must be a string")
    parameter = {"type": "string", "description": _format_hint(tool.get("format"))}
    return {
        "name": name,
        "description": description or "",
        "parameters": {
            "type": "object",
            "properties": {INPUT_PARAMETER: parameter},
            "required": [INPUT_PARAMETER],
        },
    }


def custom_call_arguments(value: object) -> str:
    """A `custom_tool_call` item's `input` as call arguments ({"arguments": input})."""
    if not isinstance(value, str):
        raise InvalidJsonError("custom_tool_call 'input' must be a string")
    return msgspec.json.encode({INPUT_PARAMETER: value}).decode()


def custom_call_input(arguments: str) -> str:
    """The freeform input of a parsed call: its `arguments` string member, else its only
    string member (the model named the parameter differently), else the text itself."""
    members = object_members(arguments)
    if members is None:
        return arguments
    strings = [(key, parse_json(raw)) for key, raw in members if raw.startswith('"')]
    for key, value in strings:
        if key == INPUT_PARAMETER and isinstance(value, str):
            return value
    if len(members) == 1 and strings and isinstance(strings[0][1], str):
        return strings[0][1]
    return arguments
