"""POST /v1/messages (Anthropic Messages, docs/reference/server.md §2.6, §3.5) and
POST /v1/messages/count_tokens: the body, and generation events to Messages JSON and
event streams.

Blocks are classified by their own `type`; unknown blocks contribute their `text`
/ `thinking` members and nothing else, so the fields real clients add (Claude
Code's cache_control, citations, signatures, context_management, output_config,
metadata) are accepted and ignored. Tool results become tool messages, the rest of
a user turn's text a user message after them.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from ds4.domain.chat import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    ToolSchema,
    UserMessage,
    effective_think_mode,
    render_chat,
    tool_schema,
    unanswerable,
)
from ds4.domain.dsml.syntax import ToolCall
from ds4.domain.errors import Ds4Error, RequestError
from ds4.domain.generation.events import (
    Finished,
    ReasoningDelta,
    TextDelta,
    ToolCallArguments,
    ToolCallFinished,
    Usage,
)
from ds4.domain.serving.exchange import (
    Api,
    GenerationRequest,
    PromptReady,
    ServedEvent,
    ToolCallOpened,
    cut_kind,
    cut_reason,
    cut_short,
)
from ds4.domain.serving.prepare import refuse_certain_overflow
from ds4.ports.system import RandomSource
from ds4.ports.tokenizer import Tokenizer
from ds4.wire.chat import content_text
from ds4.wire.constraints import anthropic_tool_choice
from ds4.wire.replies import (
    ReplyContext,
    anthropic_usage,
    arguments_object,
    arguments_string,
    event_frame,
    hex_id,
    json_body,
    stream_error_frame,
)
from ds4.wire.requests import (
    DEFAULT_MODEL,
    InvalidJsonError,
    ParsedRequest,
    anthropic_think_mode,
    check_anthropic_content,
    check_tool_count,
    clamp_int,
    decode_body,
    sampling,
    stop_list,
)

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
        tool_choice=anthropic_tool_choice(wire.tool_choice),
    )


# ---- the reply -------------------------------------------------------------
# Generation events to Anthropic Messages JSON and event streams
# (docs/reference/server.md §3.5).
#
# Blocks open lazily, one at a time, indexed in opening order: thinking (closed with
# a signature_delta carrying the message id), text, then one tool_use block per call
# with input_json_delta fragments. Calls the live stream did not show are sent whole.
# A stream the server cuts short (shutdown, an engine failure) ends as the real API ends
# one: the open block is closed and an `error` event follows, no message_delta
# (docs/adr/0047-responses-reasons-and-reasoning-only.md).

# A body cut short (only an engine failure: a cancelled non-streaming request is a
# 503) says max_tokens, the stop reason for output that ends before the model ended it.
STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "error": "max_tokens",
    "cancelled": "max_tokens",
}


_THINKING_BLOCK = {"type": "thinking", "thinking": "", "signature": ""}


def _tool_block(call_id: str, name: str) -> dict[str, object]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {}}


def stop_reason(finished: Finished) -> str:
    return STOP_REASONS[finished.finish]


def message_body(ctx: ReplyContext, finished: Finished) -> bytes:
    content: list[dict[str, object]] = []
    if finished.reasoning:
        content.append(
            {"type": "thinking", "thinking": finished.reasoning, "signature": ctx.reply_id}
        )
    if finished.content:
        content.append({"type": "text", "text": finished.content})
    for call in finished.tool_calls:
        content.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": arguments_object(call.arguments),
            }
        )
    if all(block["type"] == "thinking" for block in content):
        content.append({"type": "text", "text": ""})
    return json_body(
        {
            "id": ctx.reply_id,
            "type": "message",
            "role": "assistant",
            "model": ctx.model,
            "content": content,
            "stop_reason": stop_reason(finished),
            "stop_sequence": None,
            "usage": anthropic_usage(finished.usage),
        }
    )


class MessageStream:
    def __init__(self, ctx: ReplyContext) -> None:
        self.ctx = ctx
        self.next_index = 0
        self.open_block: str | None = None  # "thinking" | "text" | "tool_use"
        self.thinking_sent = False
        self.text_sent = ""
        self.shown_calls = 0

    def _frame(self, name: str, payload: Mapping[str, object]) -> bytes:
        return event_frame(name, {"type": name, **payload})

    def open(self, ready: PromptReady | None = None) -> list[bytes]:
        usage = ready.usage() if ready is not None else Usage(0, 0, 0)
        message: dict[str, object] = {
            "id": self.ctx.reply_id,
            "type": "message",
            "role": "assistant",
            "model": self.ctx.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": anthropic_usage(usage),
        }
        return [self._frame("message_start", {"message": message})]

    def _start(self, kind: str, block: Mapping[str, object]) -> list[bytes]:
        frames = self._stop()
        self.open_block = kind
        frames.append(
            self._frame("content_block_start", {"index": self.next_index, "content_block": block})
        )
        return frames

    def _delta(self, delta: Mapping[str, object]) -> bytes:
        return self._frame("content_block_delta", {"index": self.next_index, "delta": delta})

    def _stop(self) -> list[bytes]:
        if self.open_block is None:
            return []
        frames = []
        if self.open_block == "thinking":
            frames.append(self._delta({"type": "signature_delta", "signature": self.ctx.reply_id}))
        frames.append(self._frame("content_block_stop", {"index": self.next_index}))
        self.open_block = None
        self.next_index += 1
        return frames

    def _text(self, text: str) -> list[bytes]:
        frames = []
        if self.open_block != "text":
            frames += self._start("text", {"type": "text", "text": ""})
        self.text_sent += text
        frames.append(self._delta({"type": "text_delta", "text": text}))
        return frames

    def feed(self, event: ServedEvent) -> list[bytes]:
        if isinstance(event, ReasoningDelta) and event.text:
            frames = []
            if self.open_block != "thinking":
                frames += self._start("thinking", _THINKING_BLOCK)
            self.thinking_sent = True
            frames.append(self._delta({"type": "thinking_delta", "thinking": event.text}))
            return frames
        if isinstance(event, TextDelta) and event.text:
            return self._text(event.text)
        if isinstance(event, ToolCallOpened):
            self.shown_calls = max(self.shown_calls, event.index + 1)
            return self._start("tool_use", _tool_block(event.call_id, event.name))
        in_tool = self.open_block == "tool_use"
        if isinstance(event, ToolCallArguments) and event.fragment and in_tool:
            return [self._delta({"type": "input_json_delta", "partial_json": event.fragment})]
        if isinstance(event, ToolCallFinished) and in_tool:
            return self._stop()
        if isinstance(event, Finished):
            return self._close(event)
        return []

    def _close(self, finished: Finished) -> list[bytes]:
        if cut_short(finished):
            error = stream_error_frame(cut_reason(finished), cut_kind(finished), anthropic=True)
            return [*self._stop(), error]
        frames: list[bytes] = []
        content = finished.content
        if content.startswith(self.text_sent) and len(content) > len(self.text_sent):
            frames += self._text(content[len(self.text_sent) :])
        frames += self._stop()
        if self.thinking_sent and not self.text_sent and not finished.tool_calls:
            frames += self._start("text", {"type": "text", "text": ""})
            frames += self._stop()
        for index, call in enumerate(finished.tool_calls):
            if index < self.shown_calls:
                continue
            frames += self._start("tool_use", _tool_block(call.id, call.name))
            delta = {"type": "input_json_delta", "partial_json": arguments_string(call.arguments)}
            frames.append(self._delta(delta))
            frames += self._stop()
        delta_usage = anthropic_usage(finished.usage)
        frames.append(
            self._frame(
                "message_delta",
                {
                    "delta": {"stop_reason": stop_reason(finished), "stop_sequence": None},
                    "usage": delta_usage,
                },
            )
        )
        frames.append(self._frame("message_stop", {}))
        return frames


# ---- POST /v1/messages/count_tokens ----------------------------------------
# The spec is silent on this route; Claude Code calls it (its /context view and
# auto-compaction estimates), so it answers what the real API does: the prompt
# length `{"input_tokens":N}` for the same body a /v1/messages request would carry
# (max_tokens not needed). N is the length of the prompt the server would render and
# tokenize for that request, tool replay aside (exact DSML replay can change the bytes
# of earlier tool calls, rarely their count by more than a few tokens).


def count_tokens_body(
    body: bytes, tokenizer: Tokenizer, ctx: int, longest_token: int | None = None
) -> bytes:
    """The reply body; RequestError (Anthropic shape at the route) for a bad request. With
    `longest_token`, a prompt too long for any use of it (more tokens than the context
    for certain) is a context_length_exceeded error, not counted (ADR 0044)."""
    request = read_messages(body)
    mode = effective_think_mode(request.think_mode, ctx)
    text = render_chat(request.messages, request.schemas, mode)
    if longest_token is not None:
        refuse_certain_overflow(text, ctx, longest_token)
    return json_body({"input_tokens": len(tokenizer.encode(text))})


def message_context(
    parsed: ParsedRequest, sequence: int, created: int, random: RandomSource
) -> ReplyContext:
    """Ids msg_ + 24 hex digits, as the real API's ids look (ADR 0044)."""
    return ReplyContext(
        reply_id=hex_id(random, "msg_"),
        created=created,
        model=parsed.generation.model,
        include_usage=parsed.reply.include_usage,
    )
