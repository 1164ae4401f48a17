"""JSON tool calls to canonical DSML text (docs/reference/chat-and-dsml.md §3.2)."""

from __future__ import annotations

from collections.abc import Sequence

from ds4.domain.dsml.calls import ToolCall
from ds4.domain.dsml.json_text import minify_json, object_members, parse_json
from ds4.domain.dsml.syntax import FULL, escape_attribute, escape_param_text

_JSON_SAFE_CLOSE = "\\u003c" + FULL.param_close[1:]


def render_parameter(key: str, value: str, *, is_string: bool) -> str:
    body = escape_param_text(value) if is_string else value
    flag = "true" if is_string else "false"
    return (
        f'{FULL.param_open} name="{escape_attribute(key)}" string="{flag}">'
        f"{body}{FULL.param_close}\n"
    )


def render_invoke(call: ToolCall) -> str:
    parts = [f'{FULL.invoke_open} name="{escape_attribute(call.name)}">\n']
    members = object_members(call.arguments)
    if members is None:
        # Not a JSON object: the model still sees the text, as one string parameter.
        parts.append(render_parameter("arguments", call.arguments, is_string=True))
    else:
        for key, raw in members:
            if raw.startswith('"'):
                decoded = parse_json(raw)
                assert isinstance(decoded, str)
                parts.append(render_parameter(key, decoded, is_string=True))
            else:
                literal = minify_json(raw).replace(FULL.param_close, _JSON_SAFE_CLOSE)
                parts.append(render_parameter(key, literal, is_string=False))
    parts.append(f"{FULL.invoke_close}\n")
    return "".join(parts)


def render_tool_calls(calls: Sequence[ToolCall]) -> str:
    """The DSML block for an assistant turn's calls ("" when there are none).

    It starts with the blank line that separates it from visible text, exactly as
    the model was trained to write it.
    """
    if not calls:
        return ""
    body = "".join(render_invoke(call) for call in calls)
    return f"\n\n{FULL.block_open}\n{body}{FULL.block_close}"
