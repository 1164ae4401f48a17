"""Statuses and error types chosen from error kinds, never from messages
(docs/adr/0048-wire-formats-at-the-edge.md)."""

from __future__ import annotations

import json

import pytest

from ds4.domain.errors import ContextLengthError, ErrorKind, RequestError
from ds4.domain.generation.events import Finished, Usage
from ds4.domain.serving.exchange import Api, cut_kind
from ds4.wire.apis import anthropic_error_body, error_body, openai_error_body
from ds4.wire.replies import STATUSES, http_status, stream_error_frame

# kind -> (HTTP status, OpenAI error type, Anthropic error type), as the server answered
# before kinds existed (docs/reference/server.md §1.3, ADR 0040).
EXPECTED = {
    ErrorKind.INVALID_REQUEST: (400, "invalid_request_error", "invalid_request_error"),
    ErrorKind.CONTEXT_LENGTH: (400, "invalid_request_error", "invalid_request_error"),
    ErrorKind.UNAUTHORIZED: (401, "authentication_error", "authentication_error"),
    ErrorKind.FORBIDDEN: (403, "permission_error", "permission_error"),
    ErrorKind.NOT_FOUND: (404, "not_found_error", "not_found_error"),
    ErrorKind.METHOD_NOT_ALLOWED: (405, "invalid_request_error", "api_error"),
    ErrorKind.TIMEOUT: (408, "invalid_request_error", "invalid_request_error"),
    ErrorKind.CONFLICT: (409, "invalid_request_error", "invalid_request_error"),
    ErrorKind.TOO_LARGE: (413, "invalid_request_error", "request_too_large"),
    ErrorKind.UNSUPPORTED_MEDIA_TYPE: (415, "invalid_request_error", "invalid_request_error"),
    ErrorKind.INTERNAL: (500, "server_error", "api_error"),
    ErrorKind.UNAVAILABLE: (503, "server_error", "overloaded_error"),
}


def test_every_kind_has_a_status() -> None:
    assert set(STATUSES) == set(ErrorKind) == set(EXPECTED)


@pytest.mark.parametrize("kind", list(ErrorKind))
def test_status_and_types_follow_the_kind(kind: ErrorKind) -> None:
    status, openai_type, anthropic_type = EXPECTED[kind]
    error = RequestError("same words for every kind", kind)
    assert http_status(kind) == status
    openai = json.loads(openai_error_body(error))["error"]
    if kind is ErrorKind.CONTEXT_LENGTH:
        assert openai.pop("code") == "context_length_exceeded"
    assert openai == {"message": "same words for every kind", "type": openai_type}
    assert json.loads(anthropic_error_body(error)) == {
        "type": "error",
        "error": {"type": anthropic_type, "message": "same words for every kind"},
    }


def test_the_message_never_picks_the_status() -> None:
    """A message that used to mean 503 is a 500 when its kind says internal."""
    error = RequestError("server shutting down", ErrorKind.INTERNAL)
    assert http_status(error.kind) == 500
    assert json.loads(openai_error_body(error))["error"]["type"] == "server_error"


def test_param_is_sent_in_the_openai_shape_only() -> None:
    error = RequestError("n=2 is not supported: one choice per request", param="n")
    assert json.loads(error_body(error, Api.CHAT))["error"]["param"] == "n"
    assert "param" not in json.loads(error_body(error, Api.ANTHROPIC))["error"]


@pytest.mark.parametrize(
    ("api", "param"),
    [
        (Api.CHAT, "messages"),
        (Api.COMPLETIONS, "prompt"),
        (Api.RESPONSES, "input"),
        (None, None),
    ],
)
def test_context_length_names_the_field_that_holds_the_prompt(
    api: Api | None, param: str | None
) -> None:
    body = json.loads(error_body(ContextLengthError(70, 64, lower_bound=True), api))["error"]
    assert body.get("param") == param
    assert body["code"] == "context_length_exceeded"
    assert body["message"] == (
        "Prompt has at least 70 tokens, but the configured context size is 64 tokens"
    )
    assert (body["n_prompt_tokens"], body["n_ctx"]) == (70, 64)


def test_error_bodies_are_byte_exact() -> None:
    error = RequestError("missing messages")
    assert error_body(error, Api.CHAT) == (
        b'{"error":{"message":"missing messages","type":"invalid_request_error"}}\n'
    )
    assert error_body(error, Api.ANTHROPIC) == (
        b'{"type":"error","error":{"type":"invalid_request_error","message":"missing messages"}}\n'
    )


@pytest.mark.parametrize(
    ("finish", "anthropic_type"),
    [("cancelled", "overloaded_error"), ("error", "api_error")],
)
def test_a_turn_cut_short_streams_the_error_of_its_kind(finish: str, anthropic_type: str) -> None:
    kind = cut_kind(Finished(finish, "", None, (), Usage(1, 0, 0)))  # type: ignore[arg-type]
    frame = stream_error_frame("x", kind, anthropic=True)
    assert frame == (
        b'event: error\ndata: {"type":"error","error":{"type":"'
        + anthropic_type.encode()
        + b'","message":"x"}}\n\n'
    )
    openai = stream_error_frame("x", kind, anthropic=False)
    assert openai == b'event: error\ndata: {"error":{"message":"x","type":"server_error"}}\n\n'
