"""Server-sent event framing (docs/reference/server.md §3.5, §3.7, §3.8)."""

from __future__ import annotations

import msgspec

DONE = b"data: [DONE]\n\n"
KEEPALIVE = b": keepalive\n\n"


def data_frame(payload: object) -> bytes:
    return b"data: " + msgspec.json.encode(payload) + b"\n\n"


def event_frame(name: str, payload: object) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + msgspec.json.encode(payload) + b"\n\n"


def json_body(payload: object) -> bytes:
    return msgspec.json.encode(payload) + b"\n"
