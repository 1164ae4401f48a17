"""GET /v1/models bodies (docs/reference/server.md §3.9)."""

from __future__ import annotations

from ds4.wire.sse import json_body

DEFAULT_MODEL = "deepseek-v4-flash"  # the model a body that names none gets, and /v1/models' id
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
