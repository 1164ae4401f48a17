"""The one exception family the apps turn into a one-line message and exit code, and
the request errors the server answers (docs/adr/0048-wire-formats-at-the-edge.md)."""

from __future__ import annotations

from enum import Enum


class Ds4Error(Exception):
    """A problem the user can act on (bad file, bad flag, bad request).

    The message names the problem; the CLI prints it on one line and exits with
    `exit_code`, never with a traceback.
    """

    exit_code = 2


class ErrorKind(Enum):
    """What is wrong with a request, in the server's own terms. The wire layer picks
    the HTTP status and each API's error type from the kind (ds4.wire.replies); nothing
    chooses a status from a message."""

    INVALID_REQUEST = "invalid_request"  # a body that cannot be read or answered
    CONTEXT_LENGTH = "context_length"  # the prompt does not fit the context
    UNAUTHORIZED = "unauthorized"  # a missing or wrong API key
    FORBIDDEN = "forbidden"  # a foreign Host, a cross-site request
    NOT_FOUND = "not_found"  # an unknown endpoint or model
    METHOD_NOT_ALLOWED = "method_not_allowed"  # e.g. GET on a POST route
    TIMEOUT = "timeout"  # the body did not arrive in time
    CONFLICT = "conflict"  # the live state the request continues is gone
    TOO_LARGE = "too_large"  # the body is over the size limit
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"  # text/plain without --cors
    INTERNAL = "internal"  # the server failed (an engine error, a crash)
    UNAVAILABLE = "unavailable"  # shutting down, or too many connections


class RequestError(Ds4Error):
    """A request the server refuses; `param` names the request field at fault when
    there is one (the OpenAI error body's `param`)."""

    def __init__(
        self,
        message: str,
        kind: ErrorKind = ErrorKind.INVALID_REQUEST,
        *,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.param = param


class ContextLengthError(RequestError):
    """The prompt has `n_prompt_tokens` tokens (with `lower_bound`: at least that many,
    counted without tokenizing it), the context holds `n_ctx`."""

    def __init__(self, n_prompt_tokens: int, n_ctx: int, *, lower_bound: bool = False) -> None:
        count = f"at least {n_prompt_tokens}" if lower_bound else str(n_prompt_tokens)
        super().__init__(
            f"Prompt has {count} tokens, but the configured context size is {n_ctx} tokens",
            ErrorKind.CONTEXT_LENGTH,
        )
        self.n_prompt_tokens = n_prompt_tokens
        self.n_ctx = n_ctx


class ComputeUnavailableError(Ds4Error):
    """Part of the compute backend went away mid-request (a distributed worker died).

    The request fails; the backend recovers on its own before the next one, so the
    server answers 503 (retry) in the endpoint's own error shape rather than 500.
    """

    exit_code = 1
