"""DSML as text (docs/reference/chat-and-dsml.md §3.1–3.2): the markers of a generated
turn (think tags, DSML tag spellings) and the escaping each wrapper needs, the tool call
as the protocol layer sees it, the JSON text helpers that keep the client's bytes, and
JSON tool calls rendered as canonical DSML. Every scanner of generated text takes its
strings from here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

# --- syntax ---
# The markers of a generated turn: think tags, DSML tag spellings, and the escaping
# each DSML wrapper needs (docs/reference/chat-and-dsml.md §3.1–3.2).

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
DSML_MARKER = "｜DSML｜"
# The whitespace DSML skips between elements (and strips before a tool block).
WHITESPACE = " \t\n\r"


@dataclass(frozen=True)
class Spelling:
    """The six tags of one DSML spelling; a block uses one spelling throughout."""

    name: str
    block_open: str
    block_close: str
    invoke_open: str
    invoke_close: str
    param_open: str
    param_close: str

    @property
    def tags(self) -> tuple[str, ...]:
        return (
            self.block_open,
            self.block_close,
            self.invoke_open,
            self.invoke_close,
            self.param_open,
            self.param_close,
        )


def _spelling(name: str, prefix: str) -> Spelling:
    return Spelling(
        name=name,
        block_open=f"<{prefix}tool_calls>",
        block_close=f"</{prefix}tool_calls>",
        invoke_open=f"<{prefix}invoke",
        invoke_close=f"</{prefix}invoke>",
        param_open=f"<{prefix}parameter",
        param_close=f"</{prefix}parameter>",
    )


FULL = _spelling("full", DSML_MARKER)
SHORT = _spelling("short", "DSML｜")  # the model sometimes drops the first bar
PLAIN = _spelling("plain", "")
# Priority order of the final parser: the first spelling found wins
# (docs/reference/chat-and-dsml.md §3.4).
SPELLINGS: tuple[Spelling, ...] = (FULL, SHORT, PLAIN)


def is_partial(rest: str, *tags: str) -> bool:
    """`rest` is a proper prefix of one of `tags` (empty counts): the tag may still come."""
    return any(len(rest) < len(tag) and tag.startswith(rest) for tag in tags)


def partial_tag_at(text: str, tags: tuple[str, ...], start: int = 0) -> int:
    """Where a trailing proper prefix of one of `tags` begins in text[start:] (len(text)
    when none). Tags start with '<' and hold no other '<', so only the last '<' can."""
    longest = max(len(tag) for tag in tags)
    lt = text.rfind("<", max(start, len(text) - longest + 1))
    if lt >= 0 and is_partial(text[lt:], *tags):
        return lt
    return len(text)


_ATTR_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"))
_ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&apos;": "'"}


def escape_attribute(value: str) -> str:
    for raw, entity in _ATTR_ESCAPES:
        value = value.replace(raw, entity)
    return value


def decode_entities(value: str) -> str:
    """Decode the five XML entities in one left-to-right pass; other `&` stay."""
    out: list[str] = []
    i = 0
    while True:
        j = value.find("&", i)
        if j < 0:
            out.append(value[i:])
            return "".join(out)
        out.append(value[i:j])
        for entity, char in _ENTITIES.items():
            if value.startswith(entity, j):
                out.append(char)
                i = j + len(entity)
                break
        else:
            out.append("&")
            i = j + 1


def _ladder_patterns(param_close: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    tail = re.escape(param_close[1:])
    return re.compile(f"(<|&(?:amp;)*lt;){tail}"), re.compile(f"&((?:amp;)*)lt;{tail}")


_FULL_LADDER = _ladder_patterns(FULL.param_close)


def escape_param_text(value: str, param_close: str = FULL.param_close) -> str:
    """String-parameter body: protect only the closing parameter tag.

    `</｜DSML｜parameter>` becomes `&lt;/｜DSML｜parameter>` as the spec says. A value
    that already holds that escaped form (or `&amp;lt;…`) gets one more `amp;`, so
    unescape_param_text is an exact inverse (the spec's one-step escape is not).
    """
    pattern = _ladder(param_close)[0]
    tail_len = len(param_close) - 1

    def bump(match: re.Match[str]) -> str:
        head = match.group(0)[:-tail_len]
        return ("&lt;" if head == "<" else "&amp;" + head[1:]) + match.group(0)[-tail_len:]

    return pattern.sub(bump, value)


def unescape_param_text(value: str, param_close: str = FULL.param_close) -> str:
    """Drop one escape level before each closing parameter tag."""
    pattern = _ladder(param_close)[1]
    tail = param_close[1:]

    def lower(match: re.Match[str]) -> str:
        amps = match.group(1)
        return ("<" if not amps else "&" + amps[4:] + "lt;") + tail

    return pattern.sub(lower, value)


def _ladder(param_close: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    return _FULL_LADDER if param_close == FULL.param_close else _ladder_patterns(param_close)


# --- calls ---
# A tool call as the protocol layer sees it.


class ToolCall(msgspec.Struct, frozen=True):
    """One call: the tool name and its arguments as JSON text.

    `arguments` is normally the text of a JSON object. From a client it is kept as
    sent (so DSML rendering can keep the client's member order and escapes); from
    the parser it is the compact wire form of docs/reference/chat-and-dsml.md §3.5. `id` is empty
    until one is assigned (domain.tools).
    """

    name: str
    arguments: str
    id: str = ""


# --- json text ---
# Small JSON text helpers that keep the client's bytes where the protocol needs them.
#
# Python's json module re-serializes values; DSML argument rendering instead keeps the
# member order and string escapes exactly as written and only drops insignificant
# whitespace (docs/reference/chat-and-dsml.md §3.2). The wire escaper matches
# docs/reference/chat-and-dsml.md §3.5 byte for byte.

_WHITESPACE = frozenset(" \t\n\r")
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def json_escape(text: str) -> str:
    """Body of a JSON string literal (no quotes): `"` `\\` `\\n` `\\r` `\\t` short,
    other control characters as lower-case `\\u00xx`, everything else raw."""
    out: list[str] = []
    for char in text:
        short = _SHORT_ESCAPES.get(char)
        if short is not None:
            out.append(short)
        elif char < " ":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


def json_string(text: str) -> str:
    return '"' + json_escape(text) + '"'


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def parse_json(text: str) -> object:
    """Strict JSON (no NaN/Infinity); raises ValueError on anything else."""
    return json.loads(text, parse_constant=_reject_constant)


def is_json(text: str) -> bool:
    try:
        parse_json(text)
    except (ValueError, RecursionError):
        return False
    return True


def minify_json(text: str) -> str:
    """Drop whitespace outside strings; string bodies and escapes stay as written."""
    out: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in _WHITESPACE:
            continue
        out.append(char)
    return "".join(out)


def object_members(text: str) -> list[tuple[str, str]] | None:
    """(decoded key, raw value text) of each member of a JSON object, in order and with
    duplicates kept; None when `text` is not a valid JSON object."""
    try:
        value = parse_json(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    members: list[tuple[str, str]] = []
    pos = _skip_ws(text, text.index("{") + 1)
    while text[pos] != "}":
        key_end = _string_end(text, pos)
        key = parse_json(text[pos:key_end])
        assert isinstance(key, str)
        value_start = _skip_ws(text, _skip_ws(text, key_end) + 1)  # past ':'
        value_end = _value_end(text, value_start)
        members.append((key, text[value_start:value_end]))
        pos = _skip_ws(text, value_end)
        if text[pos] == ",":
            pos = _skip_ws(text, pos + 1)
    return members


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos


def _string_end(text: str, pos: int) -> int:
    """Index just past the string literal starting at text[pos] == '"'."""
    pos += 1
    while text[pos] != '"':
        pos += 2 if text[pos] == "\\" else 1
    return pos + 1


def _value_end(text: str, pos: int) -> int:
    """Index just past the (already validated) JSON value starting at pos."""
    if text[pos] == '"':
        return _string_end(text, pos)
    if text[pos] in "[{":
        depth = 0
        while True:
            char = text[pos]
            if char == '"':
                pos = _string_end(text, pos)
                continue
            if char in "[{":
                depth += 1
            elif char in "]}":
                depth -= 1
                if depth == 0:
                    return pos + 1
            pos += 1
    while pos < len(text) and text[pos] not in ",]}" and text[pos] not in _WHITESPACE:
        pos += 1
    return pos


# --- render ---
# JSON tool calls to canonical DSML text (docs/reference/chat-and-dsml.md §3.2).

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
