"""Request errors on the wire: the HTTP status and each API's error type chosen from
the error's kind, and the bodies in each API's own shape (docs/reference/server.md
§1.3, §1.4; docs/adr/0048-wire-formats-at-the-edge.md).

OpenAI endpoints answer `{"error":{"message","type",...}}`; the Anthropic endpoint
answers `{"type":"error","error":{"type","message",...}}` (docs/adr/0040-server-http-layer.md
overrides the reference, which used the OpenAI shape everywhere).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from ds4.domain.errors import ContextLengthError, ErrorKind, RequestError
from ds4.domain.serving.exchange import Api


@dataclass(frozen=True)
class _Status:
    http: int
    openai_type: str
    anthropic_type: str


STATUSES: dict[ErrorKind, _Status] = {
    ErrorKind.INVALID_REQUEST: _Status(400, "invalid_request_error", "invalid_request_error"),
    ErrorKind.CONTEXT_LENGTH: _Status(400, "invalid_request_error", "invalid_request_error"),
    ErrorKind.UNAUTHORIZED: _Status(401, "authentication_error", "authentication_error"),
    ErrorKind.FORBIDDEN: _Status(403, "permission_error", "permission_error"),
    ErrorKind.NOT_FOUND: _Status(404, "not_found_error", "not_found_error"),
    ErrorKind.METHOD_NOT_ALLOWED: _Status(405, "invalid_request_error", "api_error"),
    ErrorKind.TIMEOUT: _Status(408, "invalid_request_error", "invalid_request_error"),
    ErrorKind.CONFLICT: _Status(409, "invalid_request_error", "invalid_request_error"),
    ErrorKind.TOO_LARGE: _Status(413, "invalid_request_error", "request_too_large"),
    ErrorKind.UNSUPPORTED_MEDIA_TYPE: _Status(
        415, "invalid_request_error", "invalid_request_error"
    ),
    ErrorKind.INTERNAL: _Status(500, "server_error", "api_error"),
    ErrorKind.UNAVAILABLE: _Status(503, "server_error", "overloaded_error"),
}

# The field that holds the prompt: the `param` of a context_length_exceeded error.
PROMPT_PARAM = {
    Api.CHAT: "messages",
    Api.COMPLETIONS: "prompt",
    Api.ANTHROPIC: "messages",
    Api.RESPONSES: "input",
}


def http_status(kind: ErrorKind) -> int:
    return STATUSES[kind].http


def _details(error: RequestError) -> dict[str, object]:
    if isinstance(error, ContextLengthError):
        return {"n_prompt_tokens": error.n_prompt_tokens, "n_ctx": error.n_ctx}
    return {}


def openai_error_body(error: RequestError, api: Api | None = None) -> bytes:
    inner: dict[str, object] = {
        "message": error.message,
        "type": STATUSES[error.kind].openai_type,
    }
    param = error.param
    if param is None and error.kind is ErrorKind.CONTEXT_LENGTH and api is not None:
        param = PROMPT_PARAM[api]
    if param is not None:
        inner["param"] = param
    if error.kind is ErrorKind.CONTEXT_LENGTH:
        inner["code"] = "context_length_exceeded"
    inner.update(_details(error))
    return msgspec.json.encode({"error": inner}) + b"\n"


def anthropic_error_body(error: RequestError) -> bytes:
    inner: dict[str, object] = {
        "type": STATUSES[error.kind].anthropic_type,
        "message": error.message,
    }
    inner.update(_details(error))
    return msgspec.json.encode({"type": "error", "error": inner}) + b"\n"


def error_body(error: RequestError, api: Api | None) -> bytes:
    """The body in the shape of `api`'s endpoint (None: a route outside the four APIs,
    answered in the OpenAI shape)."""
    if api is Api.ANTHROPIC:
        return anthropic_error_body(error)
    return openai_error_body(error, api)


def stream_error_frame(message: str, kind: ErrorKind, *, anthropic: bool) -> bytes:
    """An error after the SSE head was sent (docs/reference/server.md §1.3)."""
    status = STATUSES[kind]
    if anthropic:
        payload = {"type": "error", "error": {"type": status.anthropic_type, "message": message}}
        return b"event: error\ndata: " + msgspec.json.encode(payload) + b"\n\n"
    body = msgspec.json.encode({"error": {"message": message, "type": status.openai_type}})
    return b"event: error\ndata: " + body + b"\n\n"
