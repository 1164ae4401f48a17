"""A request body's top-level JSON object, checked and decoded lazily
(docs/reference/server.md §1.2, ADR 0040; ADR 0044 for the memory bound).

Before decoding, one token scan (json_scan) refuses nesting deeper than 256 (as in
the reference, docs/reference/server.md §1.2), more than MAX_VALUES values, and duplicate `content`
members in one object (msgspec keeps the last one). msgspec itself refuses NaN/Infinity,
lone surrogates and malformed text.

The object's members are kept as raw JSON (msgspec.Raw: views into the body, no
copy) and decoded only when a parser asks for one, so the large member (`messages`,
`input`, `prompt`) is decoded once, into the parser's own structs, instead of first
into a dict tree of the whole body as well.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from ds4.domain.errors import RequestError
from ds4.wire.errors import invalid_request
from ds4.wire.json_scan import scan_json

T = TypeVar("T")

MAX_NESTING = 256
MAX_VALUES = 1_000_000  # ~100 MB as Python objects at worst; real agent requests: ~10^4


class JsonObject:
    """Top-level members by name, each decoded on `get` (a 400 if it cannot be)."""

    def __init__(self, members: dict[str, msgspec.Raw]) -> None:
        self._members = members

    def __contains__(self, key: str) -> bool:
        return key in self._members

    def raw(self, key: str) -> msgspec.Raw | None:
        """The member's JSON text as sent, or None when absent."""
        return self._members.get(key)

    def get(self, key: str) -> object:
        """The member's value, or None when absent."""
        raw = self._members.get(key)
        if raw is None:
            return None
        try:
            return msgspec.json.decode(raw)
        except msgspec.DecodeError as error:
            raise invalid_request(f"invalid JSON request: {key}: {error}") from None


def decode_object(body: bytes) -> JsonObject:
    """The body as a JSON object, or a 400 `invalid JSON request`."""
    shape = scan_json(body, max_depth=MAX_NESTING, max_values=MAX_VALUES)
    if shape.too_deep:
        raise invalid_request(f"invalid JSON request: nesting deeper than {MAX_NESTING}")
    if shape.too_many_values:
        raise invalid_request(f"invalid JSON request: more than {MAX_VALUES} values")
    try:
        members = msgspec.json.decode(body, type=dict[str, msgspec.Raw])
    except msgspec.ValidationError:
        raise invalid_request("invalid JSON request: the body must be a JSON object") from None
    except msgspec.DecodeError as error:
        raise invalid_request(f"invalid JSON request: {error}") from None
    if shape.duplicate_content:
        raise invalid_request("invalid JSON request: duplicate 'content' member")
    return JsonObject(members)


def decode_as(body: bytes, wire_type: type[T]) -> T:
    """Decode into a wire struct: wrong types are a 400 naming the field."""
    try:
        return msgspec.json.decode(body, type=wire_type)
    except msgspec.ValidationError as error:
        raise RequestError(f"invalid JSON request: {error}") from None
    except msgspec.DecodeError as error:
        raise invalid_request(f"invalid JSON request: {error}") from None
