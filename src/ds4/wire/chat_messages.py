"""OpenAI chat `messages` and `tools` to the chat domain's messages and tool schemas
(docs/reference/server.md §2.4).

The one implementation of these rules: the chat completions endpoint and
`ds4 cli --render-chat FILE.json` both read a body through it (chat_request).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ds4.domain.chat import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    ToolSchema,
    UserMessage,
    tool_schema,
)
from ds4.domain.dsml.syntax import ToolCall
from ds4.domain.errors import RequestError

# The roles the renderer has a message for (docs/reference/server.md §2.4).
ROLES = ("system", "developer", "user", "assistant", "tool", "function")


class WireFunction(msgspec.Struct):
    name: str | None = None
    arguments: msgspec.Raw = msgspec.Raw()  # kept as sent: an object's exact bytes


class WireToolCall(msgspec.Struct):
    id: str | None = None
    function: WireFunction | None = None


class WireMessage(msgspec.Struct):
    role: str | None = None
    content: object = None
    reasoning_content: object = None
    tool_call_id: str | None = None
    tool_calls: list[WireToolCall] | None = None


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


def _tool_call(wire: WireToolCall) -> ToolCall | None:
    function = wire.function
    if function is None or not function.name or not len(function.arguments):
        return None
    arguments = msgspec.json.decode(function.arguments)
    if arguments is None:
        return None
    text = arguments if isinstance(arguments, str) else bytes(function.arguments).decode()
    return ToolCall(name=function.name, arguments=text, id=wire.id or "")


def _message(index: int, wire: WireMessage) -> Message:
    role = wire.role or "user"
    content = content_text(wire.content)
    if role in ("system", "developer"):
        return SystemMessage(content)
    if role == "user":
        return UserMessage(content)
    if role in ("tool", "function"):
        return ToolResultMessage(content, tool_call_id=wire.tool_call_id or "")
    if role == "assistant":
        reasoning = wire.reasoning_content
        calls = (_tool_call(c) for c in wire.tool_calls or ())
        return AssistantMessage(
            content=content,
            reasoning=None if reasoning is None else content_text(reasoning),
            tool_calls=tuple(c for c in calls if c is not None),
        )
    expected = ", ".join(ROLES)
    raise RequestError(
        f"messages[{index}].role: unknown role {role!r} (expected {expected})", param="messages"
    )


def chat_messages(messages: Sequence[WireMessage]) -> tuple[Message, ...]:
    """RequestError (param `messages`) for an unknown role."""
    return tuple(_message(i, m) for i, m in enumerate(messages))


def chat_schemas(tools: list[object] | None, tool_choice: object) -> tuple[ToolSchema, ...]:
    """The tools' schemas, none with tool_choice "none" (ToolSchemaError on a bad one)."""
    if tools is None or tool_choice == "none":
        return ()
    return tuple(tool_schema(_function(tool)) for tool in tools)


def _function(tool: object) -> object:
    """A chat tool is `{"type": "function", "function": {...}}` or the function itself."""
    if isinstance(tool, dict) and "function" in tool:
        return tool["function"]
    return tool
