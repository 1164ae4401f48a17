"""What every API's reply shares (docs/reference/server.md §1.3, §3; ADR 0048): error
statuses and the SSE error frame, SSE framing, usage objects, OpenAI's finish_reason,
the reply context (ids, time, the echoed model) and GET /v1/models bodies.

Each API's own reply mapper lives in its module (chat, completions, anthropic,
responses_reply); the per-API error bodies and the choice among mappers are rows
of ds4.wire.apis.APIS.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from ds4.domain.dsml.syntax import object_members
from ds4.domain.errors import ErrorKind
from ds4.domain.generation.events import Finished, Usage
from ds4.domain.serving.exchange import cut_short
from ds4.ports.system import RandomSource
from ds4.wire.requests import WireTool

# The HTTP status and each error shape's type for an error's kind. OpenAI endpoints
# answer `{"error":{"message","type",...}}`; the Anthropic endpoint answers
# `{"type":"error","error":{"type","message",...}}` (docs/adr/0040-server-http-layer.md
# overrides the reference, which used the OpenAI shape everywhere).


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


def http_status(kind: ErrorKind) -> int:
    return STATUSES[kind].http


def stream_error_frame(message: str, kind: ErrorKind, *, anthropic: bool) -> bytes:
    """An error after the SSE head was sent (docs/reference/server.md §1.3)."""
    status = STATUSES[kind]
    if anthropic:
        payload = {"type": "error", "error": {"type": status.anthropic_type, "message": message}}
        return b"event: error\ndata: " + msgspec.json.encode(payload) + b"\n\n"
    body = msgspec.json.encode({"error": {"message": message, "type": status.openai_type}})
    return b"event: error\ndata: " + body + b"\n\n"


# ---- SSE framing -----------------------------------------------------------
# Server-sent event framing (docs/reference/server.md §3.5, §3.7, §3.8).

DONE = b"data: [DONE]\n\n"
KEEPALIVE = b": keepalive\n\n"


def data_frame(payload: object) -> bytes:
    return b"data: " + msgspec.json.encode(payload) + b"\n\n"


def event_frame(name: str, payload: object) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + msgspec.json.encode(payload) + b"\n\n"


def json_body(payload: object) -> bytes:
    return msgspec.json.encode(payload) + b"\n"


# ---- usage -----------------------------------------------------------------
# Usage objects per API (docs/reference/server.md §3.3), with cached-token fields for all three.


def _clamped(usage: Usage) -> tuple[int, int, int, int]:
    prompt = max(usage.prompt_tokens, 0)
    read = min(max(usage.cached_tokens, 0), prompt)
    write = prompt - read
    return prompt, read, write, max(usage.completion_tokens, 0)


def openai_usage(usage: Usage) -> dict[str, object]:
    prompt, read, write, completion = _clamped(usage)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": read, "cache_write_tokens": write},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def responses_usage(usage: Usage) -> dict[str, object]:
    prompt, read, write, completion = _clamped(usage)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": read, "cache_write_tokens": write},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": prompt + completion,
    }


def anthropic_usage(usage: Usage) -> dict[str, object]:
    prompt, read, write, completion = _clamped(usage)
    return {
        "input_tokens": max(0, prompt - read - write),
        "output_tokens": completion,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }


# ---- finish reason ---------------------------------------------------------
# OpenAI's finish_reason for a finished turn (chat completions and completions).


def wire_finish(finished: Finished) -> str:
    """`stop`, `length` or `tool_calls`. A turn the server cut short is `length`, the
    one value the API defines for output that stops before the model ended it
    (docs/adr/0047-responses-reasons-and-reasoning-only.md)."""
    return "length" if cut_short(finished) else finished.finish


# ---- the reply context -----------------------------------------------------
# What every reply mapper needs besides the events: ids, time, the echoed model.


@dataclass(frozen=True)
class ReplyContext:
    reply_id: str  # chatcmpl-<n> / cmpl-<n> / msg_<hex> (Anthropic) / resp_<hex>
    created: int  # Unix seconds, fixed at the start of the reply
    model: str
    include_usage: bool = False
    # Responses only: item ids drawn once per response, the summary opt-in and how
    # prompt-side tool names map back to wire names / namespaces.
    item_ids: dict[str, str] = field(default_factory=dict)
    reasoning_summary: bool = False
    wire_tools: dict[str, WireTool] = field(default_factory=dict)
    logprobs: bool = False  # completions: log-probabilities asked for (wire/logprobs.py)


def arguments_object(arguments: str) -> msgspec.Raw:
    """The call's arguments as an embeddable JSON object ({} when not an object)."""
    return msgspec.Raw(arguments.encode() if object_members(arguments) is not None else b"{}")


def arguments_string(arguments: str) -> str:
    return arguments if object_members(arguments) is not None else "{}"


# ---- GET /v1/models --------------------------------------------------------
# GET /v1/models bodies (docs/reference/server.md §3.9).

# The ids GET /v1/models/{id} also answers for, besides the server's own.
MODEL_ALIASES = ("deepseek-v4-flash", "deepseek-v4-pro", "deepseek-chat", "deepseek-reasoner")
CREATED = 1767225600
SUPPORTED_PARAMETERS = (
    "tools",
    "tool_choice",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "stop",
    "seed",
    "stream",
    "reasoning_effort",
    "parallel_tool_calls",
    "response_format",
    "structured_outputs",
    "logprobs",
    "top_logprobs",
)


def _model(model_id: str, name: str, ctx: int, max_tokens: int) -> dict[str, object]:
    return {
        "id": model_id,
        "object": "model",
        "created": CREATED,
        "owned_by": "ds4",
        "name": name,
        "context_length": ctx,
        "top_provider": {
            "context_length": ctx,
            "max_completion_tokens": min(max_tokens, ctx),
            "is_moderated": False,
        },
        "supported_parameters": list(SUPPORTED_PARAMETERS),
    }


def model_object(model_id: str, name: str, ctx: int, max_tokens: int) -> bytes:
    return json_body(_model(model_id, name, ctx, max_tokens))


def model_list(model_id: str, name: str, ctx: int, max_tokens: int) -> bytes:
    return json_body({"object": "list", "data": [_model(model_id, name, ctx, max_tokens)]})


def hex_id(random: RandomSource, prefix: str) -> str:
    """`prefix` + 24 hex digits, as the real APIs' ids look (ADR 0044)."""
    return prefix + random.token_bytes(12).hex()
