"""POST /v1/messages (Anthropic Messages) bodies (docs/reference/server.md §2.6).

Blocks are classified by their own `type`; unknown blocks contribute their `text`
/ `thinking` members and nothing else, so the fields real clients add (Claude
Code's cache_control, citations, signatures, context_management, output_config,
metadata) are accepted and ignored. Tool results become tool messages, the rest of
a user turn's text a user message after them.
"""

from __future__ import annotations

import msgspec

from ds4.domain.chat import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    ToolSchema,
    UserMessage,
    tool_schema,
    unanswerable,
)
from ds4.domain.dsml.syntax import ToolCall
from ds4.domain.errors import Ds4Error, RequestError
from ds4.domain.serving.generation_request import Api, GenerationRequest
from ds4.wire.chat_messages import content_text
from ds4.wire.json_body import InvalidJsonError, decode_body
from ds4.wire.models import DEFAULT_MODEL
from ds4.wire.parsed_request import ParsedRequest
from ds4.wire.request_fields import check_tool_count, clamp_int, sampling, stop_list
from ds4.wire.thinking import anthropic_think_mode
from ds4.wire.unsupported_fields import check_anthropic_content

_BILLING_PREFIX = "x-anthropic-"
# Tool keys that only steer the client/provider; kept out of the prompt so they do
# not change the rendered bytes (and the cache key) between otherwise equal requests.
_VOLATILE_TOOL_KEYS = ("cache_control", "defer_loading")
# Anthropic's own roles, plus the system/developer messages Claude Code puts in
# `messages` (hoisted into the system prompt; docs/agents.md); a missing role is user.
ROLES = ("user", "assistant", "system", "developer")


class _Message(msgspec.Struct):
    role: str | None = None
    content: object = None


class _OutputConfig(msgspec.Struct):
    effort: str | None = None


class MessagesBody(msgspec.Struct):
    """Every member the endpoint reads: the body is decoded once, into this."""

    messages: list[_Message] | None = None
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stream: bool | None = None
    tools: list[dict[str, object]] | None = None
    output_config: _OutputConfig | None = None
    reasoning_effort: str | None = None
    thinking: object = msgspec.UNSET
    system: object = None
    tool_choice: object = None
    stop_sequences: object = None


def _blocks(content: object) -> list[object]:
    if isinstance(content, str):
        return [content]
    return list(content) if isinstance(content, list) else []


def _tool_use(block: dict[str, object]) -> ToolCall:
    name = block.get("name")
    raw_input = block.get("input")
    arguments = "{}" if raw_input is None else msgspec.json.encode(raw_input).decode()
    tool_id = block.get("id") or block.get("tool_use_id") or ""
    tool_id = tool_id if isinstance(tool_id, str) else ""
    return ToolCall(name if isinstance(name, str) else "", arguments, tool_id)


def _user_messages(blocks: list[object]) -> list[Message]:
    results: list[Message] = []
    text: list[str] = []
    for block in blocks:
        if isinstance(block, str):
            text.append(block)
        elif isinstance(block, dict) and block.get("type") == "tool_result":
            tool_id = block.get("tool_use_id") or block.get("id") or ""
            results.append(
                ToolResultMessage(
                    content_text(block.get("content")),
                    tool_call_id=tool_id if isinstance(tool_id, str) else "",
                )
            )
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            text.append(str(block["text"]))
    if not results or text:
        results.append(UserMessage("".join(text)))
    return results


def _assistant_message(blocks: list[object]) -> AssistantMessage:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for block in blocks:
        if isinstance(block, str):
            text.append(block)
        elif isinstance(block, dict):
            if block.get("type") == "tool_use":
                calls.append(_tool_use(block))
                continue
            if isinstance(block.get("text"), str):
                text.append(str(block["text"]))
            if isinstance(block.get("thinking"), str):
                reasoning.append(str(block["thinking"]))
    return AssistantMessage("".join(text), "".join(reasoning) if reasoning else None, tuple(calls))


def _system_text(value: object) -> str:
    parts = _blocks(value)
    out = ""
    for part in parts:
        text = part.get("text") if isinstance(part, dict) else part
        if not isinstance(text, str) or text.startswith(_BILLING_PREFIX):
            continue
        if out and not out.endswith("\n"):
            out += "\n"
        out += text
    return out


def _schemas(tools: list[dict[str, object]] | None, tool_choice: object) -> tuple[ToolSchema, ...]:
    if not tools or (isinstance(tool_choice, dict) and tool_choice.get("type") == "none"):
        return ()
    schemas = []
    for tool in tools:
        kind = tool.get("type")
        if kind not in (None, "custom") and "input_schema" not in tool:
            continue  # a server tool (web_search_…): nothing the model can call here
        clean = {k: v for k, v in tool.items() if k not in _VOLATILE_TOOL_KEYS}
        schemas.append(tool_schema(clean))
    return tuple(schemas)


def parse_messages(body: bytes) -> ParsedRequest:
    """Besides what read_messages refuses, a conversation with nothing to answer is a
    400 (renderer.unanswerable)."""
    request = read_messages(body)
    problem = unanswerable(request.messages)
    if problem is not None:
        raise RequestError(f"messages: {problem}")
    return ParsedRequest(request)


def _check_roles(messages: list[_Message]) -> None:
    for index, message in enumerate(messages):
        if message.role is not None and message.role not in ROLES:
            expected = ", ".join(ROLES)
            raise RequestError(
                f"messages.{index}.role: unknown role {message.role!r} (expected {expected})"
            )


def read_messages(body: bytes) -> GenerationRequest:
    """The body as a request, whatever its last message (count_tokens counts a
    conversation that ends with the assistant's turn, as the real API does)."""
    wire = decode_body(body, MessagesBody)
    if wire.messages is None:
        raise RequestError("missing messages")
    _check_roles(wire.messages)
    check_anthropic_content([message.content for message in wire.messages])
    check_tool_count(len(wire.tools or ()))
    output_effort = wire.output_config.effort if wire.output_config else None
    model = wire.model or DEFAULT_MODEL
    mode = anthropic_think_mode(model, wire.thinking, output_effort, wire.reasoning_effort)
    try:
        messages: list[Message] = []
        for message in wire.messages:
            blocks = _blocks(message.content)
            if message.role == "assistant":
                messages.append(_assistant_message(blocks))
            elif message.role in ("system", "developer"):
                messages.append(SystemMessage(_system_text(blocks)))
            else:
                messages += _user_messages(blocks)
        system = _system_text(wire.system)
        if system:
            messages.append(SystemMessage(system))
        schemas = _schemas(wire.tools, wire.tool_choice)
    except Ds4Error as error:  # a tool schema or tool input that is not JSON
        raise InvalidJsonError(str(error)) from None
    return GenerationRequest(
        api=Api.ANTHROPIC,
        model=model,
        messages=tuple(messages),
        schemas=schemas,
        think_mode=mode,
        max_tokens=clamp_int(wire.max_tokens),
        sampling=sampling(wire.temperature, wire.top_p, wire.top_k),
        stops=stop_list(wire.stop_sequences),
        stream=bool(wire.stream),
    )
