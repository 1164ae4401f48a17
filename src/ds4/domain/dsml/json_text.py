"""Small JSON text helpers that keep the client's bytes where the protocol needs them.

Python's json module re-serializes values; DSML argument rendering instead keeps the
member order and string escapes exactly as written and only drops insignificant
whitespace (docs/reference/chat-and-dsml.md §3.2). The wire escaper matches
docs/reference/chat-and-dsml.md §3.5 byte for byte.
"""

from __future__ import annotations

import json

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
