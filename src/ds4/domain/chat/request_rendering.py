"""An OpenAI-style chat request body (JSON bytes) to the prompt text the model sees.

Backs `ds4 cli --render-chat FILE.json`: the same parsing rules as the chat
completions endpoint (docs/reference/server.md §2.4) for messages, tools, tool_choice and the
thinking controls (docs/reference/server.md §2.2), then the renderer.
"""

from __future__ import annotations

import msgspec

from ds4.domain.chat.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkMode,
    ToolResultMessage,
    UserMessage,
    effective_think_mode,
)
from ds4.domain.chat.renderer import render_chat, unanswerable
from ds4.domain.chat.tool_schemas import ToolSchema, tool_schema
from ds4.domain.dsml.calls import ToolCall
from ds4.domain.errors import Ds4Error

_EFFORTS = {
    "max": ThinkMode.MAX,
    "xhigh": ThinkMode.HIGH,
    "high": ThinkMode.HIGH,
    "medium": ThinkMode.HIGH,
    "low": ThinkMode.HIGH,
    "minimal": ThinkMode.HIGH,
    "none": ThinkMode.NONE,
}


# The roles the renderer has a message for (docs/reference/server.md §2.4).
ROLES = ("system", "developer", "user", "assistant", "tool", "function")


class ChatRequestError(Ds4Error):
    """A chat request body that cannot be understood or answered; `param` names the
    field at fault when there is one (the OpenAI error body's `param`)."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class _WireFunction(msgspec.Struct):
    name: str | None = None
    arguments: msgspec.Raw = msgspec.Raw()


class _WireToolCall(msgspec.Struct):
    id: str | None = None
    function: _WireFunction | None = None


class _WireMessage(msgspec.Struct):
    role: str | None = None
    content: msgspec.Raw = msgspec.Raw()
    reasoning_content: msgspec.Raw = msgspec.Raw()
    tool_call_id: str | None = None
    tool_calls: list[_WireToolCall] | None = None


class _WireRequest(msgspec.Struct):
    messages: list[_WireMessage]
    tools: list[msgspec.Raw] | None = None
    tool_choice: msgspec.Raw = msgspec.Raw()
    model: str | None = None
    thinking: msgspec.Raw = msgspec.Raw()
    think: bool | None = None
    reasoning_effort: str | None = None


class ChatRequest(msgspec.Struct, frozen=True):
    messages: tuple[Message, ...]
    schemas: tuple[ToolSchema, ...]
    think_mode: ThinkMode  # as requested, before the context-size fallback


def _decode(raw: msgspec.Raw) -> object:
    return msgspec.json.decode(raw) if len(raw) else None


def content_text(value: object) -> str:
    """String as is; null -> ""; array -> its strings and `text` members joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [
            p if isinstance(p, str) else p.get("text") if isinstance(p, dict) else None
            for p in value
        ]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def _tool_call(wire: _WireToolCall) -> ToolCall | None:
    function = wire.function
    if function is None or not function.name or not len(function.arguments):
        return None
    arguments = _decode(function.arguments)
    if arguments is None:
        return None
    text = arguments if isinstance(arguments, str) else bytes(function.arguments).decode()
    return ToolCall(name=function.name, arguments=text, id=wire.id or "")


def _message(index: int, wire: _WireMessage) -> Message:
    role = wire.role or "user"
    content = content_text(_decode(wire.content))
    if role in ("system", "developer"):
        return SystemMessage(content)
    if role == "user":
        return UserMessage(content)
    if role in ("tool", "function"):
        return ToolResultMessage(content, tool_call_id=wire.tool_call_id or "")
    if role == "assistant":
        reasoning = _decode(wire.reasoning_content)
        calls = (_tool_call(c) for c in wire.tool_calls or ())
        return AssistantMessage(
            content=content,
            reasoning=None if reasoning is None else content_text(reasoning),
            tool_calls=tuple(c for c in calls if c is not None),
        )
    expected = ", ".join(ROLES)
    raise ChatRequestError(
        f"messages[{index}].role: unknown role {role!r} (expected {expected})", param="messages"
    )


def _schemas(wire: _WireRequest) -> tuple[ToolSchema, ...]:
    if wire.tools is None or _decode(wire.tool_choice) == "none":
        return ()
    schemas = []
    for raw in wire.tools:
        element = _decode(raw)
        if isinstance(element, dict) and "function" in element:
            element = element["function"]
        schemas.append(tool_schema(element))
    return tuple(schemas)


def _think_mode(wire: _WireRequest) -> ThinkMode:
    effort: ThinkMode | None = None
    if wire.reasoning_effort is not None:
        effort = _EFFORTS.get(wire.reasoning_effort)
        if effort is None:
            raise ChatRequestError(f"unknown reasoning_effort {wire.reasoning_effort!r}")
    enabled, explicit = True, False
    if len(wire.thinking):
        explicit = True  # any value, even one we cannot read, turns the model alias off
        thinking = _decode(wire.thinking)
        if isinstance(thinking, bool):
            enabled = thinking
        elif isinstance(thinking, dict) and thinking.get("type") in ("enabled", "disabled"):
            enabled = thinking["type"] == "enabled"
    if wire.think is not None:
        explicit, enabled = True, wire.think
    if not explicit and wire.model in ("deepseek-chat", "deepseek-reasoner"):
        enabled = wire.model == "deepseek-reasoner"
    if not enabled or effort is ThinkMode.NONE:
        return ThinkMode.NONE
    return ThinkMode.MAX if effort is ThinkMode.MAX else ThinkMode.HIGH


def parse_chat_request(body: bytes) -> ChatRequest:
    """The request, or ChatRequestError: unreadable JSON, an unknown role, or a
    conversation with nothing to answer (renderer.unanswerable)."""
    try:
        wire = msgspec.json.decode(body, type=_WireRequest)
        messages = tuple(_message(i, m) for i, m in enumerate(wire.messages))
        request = ChatRequest(messages, _schemas(wire), _think_mode(wire))
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise ChatRequestError(f"invalid chat request: {error}") from None
    problem = unanswerable(messages)
    if problem is not None:
        raise ChatRequestError(f"messages: {problem}", param="messages")
    return request


def render_chat_request(body: bytes, *, mode: ThinkMode | None, context_size: int) -> str:
    """Prompt text for `body`. `mode` (a --think/--nothink/--think-max flag) overrides
    the body's own thinking controls; Think Max falls back to Think below 384 Ki."""
    request = parse_chat_request(body)
    requested = request.think_mode if mode is None else mode
    effective = effective_think_mode(requested, context_size)
    return render_chat(request.messages, request.schemas, effective)
