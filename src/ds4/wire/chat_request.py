"""POST /v1/chat/completions and /v1/completions bodies (docs/reference/server.md §2.4, §3.6).

Messages, tools, tool_choice and thinking go through the chat domain's own intake
(chat.request_rendering, the one implementation of those rules); this module adds the
fields that only the server reads. Completions become a two-message chat whose
rendering is byte-identical to the reference's fixed completion template.
"""

from __future__ import annotations

from dataclasses import replace

import msgspec

from ds4.domain.chat.messages import SystemMessage, ThinkMode, UserMessage
from ds4.domain.chat.request_rendering import ChatRequestError, parse_chat_request
from ds4.domain.errors import Ds4Error, RequestError
from ds4.domain.serving.generation_request import DEFAULT_MODEL, Api, GenerationRequest
from ds4.wire.json_body import JsonObject, decode_as, decode_object
from ds4.wire.request_fields import check_tool_count, clamp_int, sampling, stop_list
from ds4.wire.thinking import ThinkingControls, effort_mode, resolve_think_mode
from ds4.wire.thinking import thinking_switch as read_thinking_switch
from ds4.wire.unsupported_fields import (
    check_chat_content,
    check_choices,
    check_logprobs,
)

COMPLETION_SYSTEM = "You are a helpful assistant"


class _StreamOptions(msgspec.Struct):
    include_usage: bool | None = None


class _Wire(msgspec.Struct):
    model: str | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    min_p: float | None = None
    top_k: int | None = None
    seed: int | float | None = None
    stream: bool | None = None
    stream_options: _StreamOptions | None = None
    tools: list[msgspec.Raw] | None = None
    think: bool | None = None
    reasoning_effort: str | None = None


def _decode(body: bytes) -> tuple[JsonObject, _Wire]:
    obj = decode_object(body)
    wire = decode_as(body, _Wire)
    check_tool_count(len(wire.tools or ()))
    return obj, wire


def _request(obj: JsonObject, wire: _Wire, api: Api, think_mode: ThinkMode) -> GenerationRequest:
    seed = wire.seed
    max_tokens = wire.max_completion_tokens if wire.max_tokens is None else wire.max_tokens
    return GenerationRequest(
        api=api,
        model=wire.model or DEFAULT_MODEL,
        messages=(),
        schemas=(),
        think_mode=think_mode,
        max_tokens=clamp_int(max_tokens),
        sampling=sampling(
            wire.temperature,
            wire.top_p,
            wire.top_k,
            wire.min_p,
            int(seed) if seed is not None and abs(seed) < 2**62 else None,
        ),
        stops=stop_list(obj.get("stop")),
        stream=bool(wire.stream),
        include_usage=bool(wire.stream_options and wire.stream_options.include_usage),
    )


def parse_chat_completion(body: bytes) -> GenerationRequest:
    obj, wire = _decode(body)
    if "messages" not in obj:
        raise RequestError("missing messages")
    check_choices(obj)
    check_logprobs(obj)
    check_chat_content(obj)
    effort_mode(wire.reasoning_effort, "reasoning_effort")  # validates the name
    try:
        chat = parse_chat_request(body)
    except ChatRequestError as error:
        if error.param is not None:  # a readable body the model cannot be asked
            raise RequestError(str(error), param=error.param) from None
        raise RequestError(f"invalid JSON request: {error}") from None
    except Ds4Error as error:
        raise RequestError(f"invalid JSON request: {error}") from None
    base = _request(obj, wire, Api.CHAT, chat.think_mode)
    return replace(base, messages=chat.messages, schemas=chat.schemas)


def _prompt_text(value: object) -> str:
    if isinstance(value, list) and value and isinstance(value[0], str):
        return value[0]
    return value if isinstance(value, str) else ""


def parse_completion(body: bytes) -> GenerationRequest:
    obj, wire = _decode(body)
    if "prompt" not in obj:
        raise RequestError("missing prompt")
    check_choices(obj, completions=True)
    check_logprobs(obj, completions=True)
    controls = read_thinking_switch(obj.get("thinking"), "thinking" in obj)
    if wire.think is not None:
        controls = ThinkingControls(explicit=True, enabled=wire.think)
    effort = effort_mode(wire.reasoning_effort, "reasoning_effort")
    controls = ThinkingControls(controls.explicit, controls.enabled, effort)
    prompt = _prompt_text(obj.get("prompt"))
    mode = resolve_think_mode(wire.model or DEFAULT_MODEL, controls)
    base = _request(obj, wire, Api.COMPLETIONS, mode)
    messages = (SystemMessage(COMPLETION_SYSTEM), UserMessage(prompt))
    return replace(base, messages=messages, prompt=prompt)
