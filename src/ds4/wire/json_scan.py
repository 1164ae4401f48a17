"""One pass over a request body's JSON tokens, before it is decoded (ADR 0044).

It measures what decoding would cost and msgspec does not bound: how deep the
containers nest, and how many values there are (each becomes a Python object of
50-100 bytes, so 64 MiB of `[],` would take gigabytes). It also finds a duplicate
`content` member in one object, which msgspec would silently resolve to the last one.
The pass stops as soon as a limit is passed. Strings are matched whole by the regex
engine (possessive quantifiers: no backtracking state, however long the string),
so a 60 MiB string costs one match. The body is not trusted to be valid JSON here;
the decoder that runs next is the judge of that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec

_TOKEN = re.compile(
    rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"(\s*+:)?'  # a string; group 1: it is an object key
    rb"|[\[\]{}]"  # a bracket
    rb'|[^\s,:\[\]{}"]++'  # a number, true, false or null
)
_WATCHED_KEY = "content"


@dataclass(frozen=True)
class JsonShape:
    too_deep: bool = False
    too_many_values: bool = False
    duplicate_content: bool = False


def _is_watched_key(token: bytes) -> bool:
    key = token[: token.rindex(b'"') + 1]
    if key == b'"content"':
        return True
    if b"\\" not in key or len(key) > 64:
        return False
    try:  # "\u0063ontent" is `content` too
        return bool(msgspec.json.decode(key) == _WATCHED_KEY)
    except msgspec.DecodeError:
        return False


def scan_json(body: bytes, *, max_depth: int, max_values: int) -> JsonShape:
    """Stops at the first container deeper than max_depth or value past max_values."""
    # per open container: None for an array, else whether `content` was seen
    open_containers: list[bool | None] = []
    values = 0
    duplicate = False
    for match in _TOKEN.finditer(body):
        first = body[match.start()]
        if first in b"]}":
            if open_containers:
                open_containers.pop()
            continue
        if first == 0x22 and match.group(1) is not None:  # an object key, not a value
            in_object = bool(open_containers) and open_containers[-1] is not None
            if in_object and _is_watched_key(match.group()):
                duplicate |= bool(open_containers[-1])
                open_containers[-1] = True
            continue
        values += 1
        if values > max_values:
            return JsonShape(too_many_values=True)
        if first in b"[{":
            open_containers.append(False if first == 0x7B else None)
            if len(open_containers) > max_depth:
                return JsonShape(too_deep=True)
    return JsonShape(duplicate_content=duplicate)
