"""Checks on a raw request body before any struct decoding (DECISIONS.md, Server/JSON).

msgspec already refuses NaN/Infinity, lone surrogates and malformed text; it does not
bound nesting, so a depth scan runs first (257 nested containers are refused, as in
the reference's A-59), and it keeps the last of duplicate keys, so duplicate
`content` members in one object are refused here too.
"""

from __future__ import annotations

import json
from typing import TypeVar

import msgspec

from ds4.domain.api.errors import ApiError, invalid_request

T = TypeVar("T")

MAX_NESTING = 256
_OPEN = frozenset(b"[{")
_CLOSE = frozenset(b"]}")


def nesting_depth(body: bytes) -> int:
    """Deepest container nesting outside string literals (a linear byte scan)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in _OPEN:
            depth += 1
            deepest = max(deepest, depth)
        elif byte in _CLOSE:
            depth -= 1
    return deepest


class _DuplicateKeyError(Exception):
    pass


def decode_object(body: bytes) -> dict[str, object]:
    """The body as a JSON object, or a 400 `invalid JSON request`."""
    if nesting_depth(body) > MAX_NESTING:
        raise invalid_request("invalid JSON request: nesting deeper than 256")
    try:
        value = msgspec.json.decode(body)
    except msgspec.DecodeError as error:
        raise invalid_request(f"invalid JSON request: {error}") from None
    if not isinstance(value, dict):
        raise invalid_request("invalid JSON request: the body must be a JSON object")
    if body.count(b'"content"') > 1 and _has_duplicate_key(body, "content"):
        raise invalid_request("invalid JSON request: duplicate 'content' member")
    return value


def _has_duplicate_key(body: bytes, key: str) -> bool:
    # msgspec keeps the last duplicate; only bodies that repeat the key textually
    # pay for the stdlib decoder's object-pairs view.
    def pairs_hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
        if sum(1 for k, _ in pairs if k == key) > 1:
            raise _DuplicateKeyError
        return dict(pairs)

    try:
        json.loads(body, object_pairs_hook=pairs_hook)
    except _DuplicateKeyError:
        return True
    except ValueError:
        return False
    return False


def decode_as(body: bytes, wire_type: type[T]) -> T:
    """Decode into a wire struct: wrong types are a 400 naming the field."""
    try:
        return msgspec.json.decode(body, type=wire_type)
    except msgspec.ValidationError as error:
        raise ApiError(400, f"invalid JSON request: {error}") from None
    except msgspec.DecodeError as error:
        raise invalid_request(f"invalid JSON request: {error}") from None
