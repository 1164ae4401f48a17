"""The APIS table: one row per API, the one place a per-API choice is made on the wire
(docs/adr/0048-wire-formats-at-the-edge.md).

A row names the API's POST route(s), its request parser, its reply context (the ids
its replies carry), its JSON reply mapper, its stream mapper and its error shape. The
HTTP routes (adapters/http/app.py: parse, reply, stream, errors) and the error
bodies below read it. Adding an API is one wire module, one row here and
one `Api` member with its row of ds4.domain.serving.exchange.SERVING_RULES;
tests/unit/wire/test_apis.py checks every member has a whole row in both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import msgspec

from ds4.domain.errors import ContextLengthError, ErrorKind, RequestError
from ds4.domain.generation.events import Finished
from ds4.domain.serving.exchange import Api, PromptReady, ServedEvent
from ds4.ports.system import RandomSource
from ds4.wire.anthropic import MessageStream, message_body, message_context, parse_messages
from ds4.wire.chat import (
    ChatCompletionStream,
    chat_completion_body,
    chat_context,
    parse_chat_completion,
)
from ds4.wire.completions import (
    CompletionStream,
    completion_body,
    completion_context,
    parse_completion,
)
from ds4.wire.replies import STATUSES, ReplyContext, stream_error_frame
from ds4.wire.requests import ParsedRequest
from ds4.wire.responses_reply import ResponseStream, response_body, response_context
from ds4.wire.responses_request import parse_responses


class StreamMapper(Protocol):
    def open(self, ready: PromptReady | None = None) -> list[bytes]: ...

    def feed(self, event: ServedEvent) -> list[bytes]: ...


Parser = Callable[[bytes], ParsedRequest]
# (parsed request, request sequence number, Unix seconds, random source) -> context
ContextMaker = Callable[[ParsedRequest, int, int, RandomSource], ReplyContext]


# ---- error shapes ----------------------------------------------------------
# OpenAI endpoints answer `{"error":{"message","type",...}}`; the Anthropic endpoint
# answers `{"type":"error","error":{"type","message",...}}` (docs/reference/server.md
# §1.3, §1.4; docs/adr/0040-server-http-layer.md overrides the reference, which used
# the OpenAI shape everywhere). Statuses and types by kind: replies.STATUSES.


def _details(error: RequestError) -> dict[str, object]:
    if isinstance(error, ContextLengthError):
        return {"n_prompt_tokens": error.n_prompt_tokens, "n_ctx": error.n_ctx}
    return {}


def openai_error_body(error: RequestError, api: Api | None = None) -> bytes:
    """A context_length_exceeded error without a `param` names `api`'s prompt field."""
    inner: dict[str, object] = {
        "message": error.message,
        "type": STATUSES[error.kind].openai_type,
    }
    param = error.param
    if param is None and error.kind is ErrorKind.CONTEXT_LENGTH and api is not None:
        param = APIS[api].prompt_param
    if param is not None:
        inner["param"] = param
    if error.kind is ErrorKind.CONTEXT_LENGTH:
        inner["code"] = "context_length_exceeded"
    inner.update(_details(error))
    return msgspec.json.encode({"error": inner}) + b"\n"


def anthropic_error_body(error: RequestError, api: Api | None = None) -> bytes:
    inner: dict[str, object] = {
        "type": STATUSES[error.kind].anthropic_type,
        "message": error.message,
    }
    inner.update(_details(error))
    return msgspec.json.encode({"type": "error", "error": inner}) + b"\n"


@dataclass(frozen=True)
class ErrorShape:
    """How an API's endpoints spell an error: the JSON body, and the SSE frame of an
    error after the stream's head went out."""

    body: Callable[[RequestError, Api | None], bytes]
    stream_frame: Callable[[str, ErrorKind], bytes]


OPENAI_ERRORS = ErrorShape(openai_error_body, partial(stream_error_frame, anthropic=False))
ANTHROPIC_ERRORS = ErrorShape(anthropic_error_body, partial(stream_error_frame, anthropic=True))


# ---- the table -------------------------------------------------------------


@dataclass(frozen=True)
class ApiSpec:
    api: Api
    paths: tuple[str, ...]  # its POST routes; an error under them answers in its shape
    parse: Parser
    context: ContextMaker
    reply: Callable[[ReplyContext, Finished], bytes]  # the non-streaming body
    stream: Callable[[ReplyContext], StreamMapper]  # SSE frames per served event
    errors: ErrorShape
    prompt_param: str  # the field that holds the prompt (a context-length error's param)


APIS: dict[Api, ApiSpec] = {
    spec.api: spec
    for spec in (
        ApiSpec(
            Api.CHAT,
            ("/v1/chat/completions",),
            parse_chat_completion,
            chat_context,
            chat_completion_body,
            ChatCompletionStream,
            OPENAI_ERRORS,
            prompt_param="messages",
        ),
        ApiSpec(
            Api.COMPLETIONS,
            ("/v1/completions",),
            parse_completion,
            completion_context,
            completion_body,
            CompletionStream,
            OPENAI_ERRORS,
            prompt_param="prompt",
        ),
        ApiSpec(
            Api.ANTHROPIC,
            ("/v1/messages",),
            parse_messages,
            message_context,
            message_body,
            MessageStream,
            ANTHROPIC_ERRORS,
            prompt_param="messages",
        ),
        ApiSpec(
            Api.RESPONSES,
            ("/v1/responses",),
            parse_responses,
            response_context,
            response_body,
            ResponseStream,
            OPENAI_ERRORS,
            prompt_param="input",
        ),
    )
}


# ---- what reads it ---------------------------------------------------------


def api_of_path(path: str) -> Api | None:
    """The API whose routes `path` is under (a trailing slash ignored), if any: an error
    there answers in that API's shape (/v1/messages/count_tokens: Anthropic's)."""
    path = path.rstrip("/")
    for spec in APIS.values():
        if any(path.startswith(route) for route in spec.paths):
            return spec.api
    return None


def error_body(error: RequestError, api: Api | None) -> bytes:
    """The body in the shape of `api`'s endpoint (None: a route outside the APIs,
    answered in the OpenAI shape)."""
    shape = OPENAI_ERRORS if api is None else APIS[api].errors
    return shape.body(error, api)
