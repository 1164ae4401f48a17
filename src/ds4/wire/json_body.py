"""A request body decoded once, into the API's own body struct
(docs/reference/server.md §1.2, ADR 0040; ADR 0044 for the memory bound; ADR 0048).

Before decoding, one token scan (json_scan) refuses nesting deeper than 256 (as in
the reference, docs/reference/server.md §1.2), more than MAX_VALUES values, and duplicate `content`
members in one object (msgspec keeps the last one). msgspec itself refuses NaN/Infinity,
lone surrogates and malformed text, and wrong types name the field at fault.

Each API's parser declares every member it reads in one msgspec struct, so the body
is decoded exactly once, straight into typed fields and the parser's own value trees
(members the parser reads as JSON values are typed `object`; an absent member that
must be told from `null` defaults to msgspec.UNSET). Members nobody reads are skipped.
"""

from __future__ import annotations

import re
from typing import TypeVar

import msgspec

from ds4.domain.errors import RequestError
from ds4.wire.json_scan import scan_json

T = TypeVar("T")

MAX_NESTING = 256
MAX_VALUES = 1_000_000  # ~100 MB as Python objects at worst; real agent requests: ~10^4
_OBJECT_START = re.compile(rb"[ \t\r\n]*\{")


class InvalidJsonError(RequestError):
    """A body that is not the JSON its API takes; `detail` says why, without the
    `invalid JSON request:` prefix the server's message starts with."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"invalid JSON request: {detail}")
        self.detail = detail


def decode_body(body: bytes, body_type: type[T]) -> T:
    """The body as `body_type`, decoded once; InvalidJsonError (a 400) when it is not
    one: too deep, too many values, malformed, not an object, a member of the wrong
    type (named), or a duplicate `content` member."""
    shape = scan_json(body, max_depth=MAX_NESTING, max_values=MAX_VALUES)
    if shape.too_deep:
        raise InvalidJsonError(f"nesting deeper than {MAX_NESTING}")
    if shape.too_many_values:
        raise InvalidJsonError(f"more than {MAX_VALUES} values")
    try:
        value = msgspec.json.decode(body, type=body_type)
    except msgspec.ValidationError as error:
        if _OBJECT_START.match(body) is None:
            raise InvalidJsonError("the body must be a JSON object") from None
        raise InvalidJsonError(str(error)) from None
    except msgspec.DecodeError as error:
        raise InvalidJsonError(str(error)) from None
    if shape.duplicate_content:
        raise InvalidJsonError("duplicate 'content' member")
    return value


def present(value: object) -> bool:
    """The member was sent (even as null)."""
    return not isinstance(value, msgspec.UnsetType)
