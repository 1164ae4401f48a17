"""Tool schemas and their canonical prompt text (docs/reference/chat-and-dsml.md §2.4,
ADR 0020).

Each schema is re-serialized the way DeepSeek's own encoder writes it: object key
order kept, ", " and ": " separators, UTF-8 characters raw instead of \\u escapes.
So semantically equal requests give byte-identical prompts (and cache hits).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

import msgspec

from ds4.domain.chat.constants import TOOLS_HEAD, TOOLS_TAIL
from ds4.domain.errors import Ds4Error


class ToolSchemaError(Ds4Error):
    """A tool schema that cannot be rendered."""


class ToolSchema(msgspec.Struct, frozen=True):
    """One tool as the model sees it: its name and its canonical JSON line."""

    name: str
    line: str


def canonical_json(value: object) -> str:
    """json.dumps(value, ensure_ascii=False) for JSON values, refusing non-finite numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolSchemaError("tool schema contains a number that is not finite")
    if isinstance(value, Mapping):
        items = (
            f"{json.dumps(str(k), ensure_ascii=False)}: {canonical_json(v)}"
            for k, v in value.items()
        )
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(canonical_json(v) for v in value) + "]"
    if value is None or isinstance(value, bool | int | float | str):
        return json.dumps(value, ensure_ascii=False)
    raise ToolSchemaError(f"tool schema contains a non-JSON value of type {type(value).__name__}")


def tool_schema(definition: object) -> ToolSchema:
    """A schema from the decoded definition object (the OpenAI `function` value or an
    Anthropic tool as sent)."""
    if not isinstance(definition, Mapping):
        raise ToolSchemaError("tool schema must be a JSON object")
    name = definition.get("name")
    if not isinstance(name, str) or not name:
        raise ToolSchemaError("tool schema needs a non-empty string 'name'")
    return ToolSchema(name=name, line=canonical_json(definition))


def tools_system_text(schemas: Sequence[ToolSchema]) -> str:
    """The tool block that opens the system region ("" without tools)."""
    if not schemas:
        return ""
    return TOOLS_HEAD + "\n".join(s.line for s in schemas) + TOOLS_TAIL
