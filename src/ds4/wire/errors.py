"""API errors and their bodies in each API's own shape (docs/reference/server.md §1.3, §1.4).

OpenAI endpoints answer `{"error":{"message","type",...}}`; the Anthropic endpoint
answers `{"type":"error","error":{"type","message",...}}` (docs/adr/0040-server-http-layer.md
overrides the reference, which used the OpenAI shape everywhere).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from ds4.domain.errors import Ds4Error

_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    500: "server_error",
    503: "server_error",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "invalid_request_error",
    409: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    500: "api_error",
    503: "overloaded_error",
}


class ApiError(Ds4Error):
    """A request the server refuses with an HTTP status and a protocol error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        extra: dict[str, int] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.extra = extra or {}


@dataclass(frozen=True)
class ContextLimit:
    n_prompt_tokens: int
    n_ctx: int
    extra: dict[str, int] = field(default_factory=dict)


def invalid_request(message: str = "invalid JSON request") -> ApiError:
    return ApiError(400, message)


def context_length_error(
    n_prompt: int, n_ctx: int, param: str, *, lower_bound: bool = False
) -> ApiError:
    """The pre-check error; `param` is the field that holds the prompt. lower_bound:
    the prompt was not tokenized, `n_prompt` is the least it can have (prompt_bound)."""
    count = f"at least {n_prompt}" if lower_bound else str(n_prompt)
    return ApiError(
        400,
        f"Prompt has {count} tokens, but the configured context size is {n_ctx} tokens",
        param=param,
        code="context_length_exceeded",
        extra={"n_prompt_tokens": n_prompt, "n_ctx": n_ctx},
    )


def openai_error_body(error: ApiError) -> bytes:
    inner: dict[str, object] = {
        "message": error.message,
        "type": _OPENAI_TYPES.get(error.status, "invalid_request_error"),
    }
    if error.param is not None:
        inner["param"] = error.param
    if error.code is not None:
        inner["code"] = error.code
    inner.update(error.extra)
    return msgspec.json.encode({"error": inner}) + b"\n"


def anthropic_error_body(error: ApiError) -> bytes:
    inner: dict[str, object] = {
        "type": _ANTHROPIC_TYPES.get(error.status, "api_error"),
        "message": error.message,
    }
    inner.update(error.extra)
    return msgspec.json.encode({"type": "error", "error": inner}) + b"\n"


def error_body(error: ApiError, *, anthropic: bool) -> bytes:
    return anthropic_error_body(error) if anthropic else openai_error_body(error)


def stream_error_frame(message: str, *, anthropic: bool, status: int = 500) -> bytes:
    """An error after the SSE head was sent (docs/reference/server.md §1.3); `status` picks the
    Anthropic error type as for a body (503: overloaded_error)."""
    if anthropic:
        kind = _ANTHROPIC_TYPES.get(status, "api_error")
        payload = {"type": "error", "error": {"type": kind, "message": message}}
        return b"event: error\ndata: " + msgspec.json.encode(payload) + b"\n\n"
    body = msgspec.json.encode({"error": {"message": message, "type": "server_error"}})
    return b"event: error\ndata: " + body + b"\n\n"
