"""POST /v1/chat/completions (docs/reference/server.md §2.4, §3.5): the body, its
messages and tools, and generation events to chat completion JSON and chunk streams;
also `ds4 cli --render-chat FILE.json`, which reads a chat body the way the endpoint does.

The body is decoded once (requests.decode_body) into ChatBody; messages and tools go
through chat_messages / chat_schemas and the thinking controls through
requests.openai_think_mode, the one implementation of those rules. The members chat
and completions share (OpenAIBody, openai_request) live here; completions.py reads
its body through them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import msgspec

from ds4.domain.chat import (
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkMode,
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
    TokenScored,
    ToolCallArguments,
)
from ds4.domain.sampling import TokenLogprob
from ds4.domain.serving.exchange import (
    Api,
    GenerationRequest,
    PromptReady,
    ServedEvent,
    ToolCallOpened,
)
from ds4.ports.system import RandomSource
from ds4.wire.constraints import grammar_field, one_format, openai_tool_choice, response_format
from ds4.wire.logprobs import chat_logprobs, chat_logprobs_object
from ds4.wire.replies import (
    DONE,
    ReplyContext,
    arguments_string,
    data_frame,
    json_body,
    openai_usage,
    wire_finish,
)
from ds4.wire.requests import (
    DEFAULT_MODEL,
    InvalidJsonError,
    ParsedRequest,
    ReplyOptions,
    check_chat_content,
    check_choices,
    check_tool_count,
    clamp_int,
    decode_body,
    openai_think_mode,
    sampling,
    stop_list,
)


class ChatRequestError(RequestError):
    """A chat body render_chat_request cannot render: unreadable (the message starts
    `invalid chat request:`), an unknown role, or nothing to answer; `param` names the
    field at fault when there is one."""


class _StreamOptions(msgspec.Struct):
    include_usage: bool | None = None


class OpenAIBody(msgspec.Struct):
    """The members chat completions and completions both read."""

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
    tools: list[object] | None = None
    thinking: object = msgspec.UNSET
    think: bool | None = None
    reasoning_effort: str | None = None
    stop: object = None
    n: object = None
    logprobs: object = None
    top_logprobs: object = None
    response_format: object = msgspec.UNSET
    grammar: object = msgspec.UNSET


class ChatBody(OpenAIBody):
    messages: list[WireMessage] | msgspec.UnsetType = msgspec.UNSET
    tool_choice: object = None
    parallel_tool_calls: object = None


@dataclass(frozen=True)
class ChatPrompt:
    """What a chat body asks the model: the conversation, tools and think mode."""

    messages: tuple[Message, ...]
    schemas: tuple[ToolSchema, ...]
    think_mode: ThinkMode  # as requested, before the context-size fallback


def openai_think_mode_of(body: OpenAIBody) -> ThinkMode:
    return openai_think_mode(body.model, body.thinking, body.think, body.reasoning_effort)


def _chat_prompt(body: ChatBody, messages: list[WireMessage]) -> ChatPrompt:
    """Think mode, messages and schemas; RequestError when they cannot be read or the
    conversation has nothing to answer (renderer.unanswerable)."""
    think_mode = openai_think_mode_of(body)
    converted = chat_messages(messages)
    try:
        schemas = chat_schemas(body.tools, body.tool_choice)
    except Ds4Error as error:  # a tool schema that is not one
        raise InvalidJsonError(str(error)) from None
    problem = unanswerable(converted)
    if problem is not None:
        raise RequestError(f"messages: {problem}", param="messages")
    return ChatPrompt(converted, schemas, think_mode)


def openai_request(body: OpenAIBody, api: Api, think_mode: ThinkMode) -> GenerationRequest:
    seed = body.seed
    max_tokens = body.max_completion_tokens if body.max_tokens is None else body.max_tokens
    return GenerationRequest(
        api=api,
        model=body.model or DEFAULT_MODEL,
        messages=(),
        schemas=(),
        think_mode=think_mode,
        max_tokens=clamp_int(max_tokens),
        sampling=sampling(
            body.temperature,
            body.top_p,
            body.top_k,
            body.min_p,
            int(seed) if seed is not None and abs(seed) < 2**62 else None,
        ),
        stops=stop_list(body.stop),
        stream=bool(body.stream),
        output_format=one_format(
            response_format(body.response_format), grammar_field(body.grammar)
        ),
    )


def openai_reply_options(body: OpenAIBody) -> ReplyOptions:
    return ReplyOptions(
        include_usage=bool(body.stream_options and body.stream_options.include_usage)
    )


def parse_chat_completion(body: bytes) -> ParsedRequest:
    chat = decode_body(body, ChatBody)
    check_tool_count(len(chat.tools or ()))
    if isinstance(chat.messages, msgspec.UnsetType):
        raise RequestError("missing messages")
    check_choices({"n": chat.n})
    logprobs = chat_logprobs(chat.logprobs, chat.top_logprobs)
    check_chat_content([message.content for message in chat.messages])
    prompt = _chat_prompt(chat, chat.messages)
    base = openai_request(chat, Api.CHAT, prompt.think_mode)
    choice = openai_tool_choice(chat.tool_choice, chat.parallel_tool_calls)
    request = replace(
        base,
        messages=prompt.messages,
        schemas=prompt.schemas,
        tool_choice=choice,
        logprobs=logprobs,
    )
    return ParsedRequest(request, openai_reply_options(chat))


def render_chat_request(body: bytes, *, mode: ThinkMode | None, context_size: int) -> str:
    """Prompt text for a chat body (`ds4 cli --render-chat`, ds4.lib). `mode` (a --think
    / --nothink / --think-max flag) overrides the body's own thinking controls; Think
    Max falls back to Think below 384 Ki. ChatRequestError names what is wrong."""
    try:
        chat = decode_body(body, ChatBody)
        if isinstance(chat.messages, msgspec.UnsetType):
            raise InvalidJsonError("missing messages")
        prompt = _chat_prompt(chat, chat.messages)
    except InvalidJsonError as error:
        raise ChatRequestError(f"invalid chat request: {error.detail}") from None
    except RequestError as error:  # an unknown role, nothing to answer
        raise ChatRequestError(error.message, param=error.param) from None
    requested = prompt.think_mode if mode is None else mode
    effective = effective_think_mode(requested, context_size)
    return render_chat(prompt.messages, prompt.schemas, effective)


# ---- chat messages and tools -----------------------------------------------
# OpenAI chat `messages` and `tools` to the chat domain's messages and tool schemas
# (docs/reference/server.md §2.4).
#
# The one implementation of these rules: the chat completions endpoint and
# `ds4 cli --render-chat FILE.json` both read a body through it (parse_chat_completion,
# render_chat_request).

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


# ---- the reply -------------------------------------------------------------
# Generation events to OpenAI chat completion JSON and chunk streams
# (docs/reference/server.md §3.5).
#
# Reasoning goes to `reasoning_content`; tool calls stream live (header with id and
# name, then argument fragments); calls the live stream did not show are sent whole at
# the end, so every parsed call reaches the client exactly once.


def _call(index: int, call: ToolCall) -> dict[str, object]:
    return {
        "index": index,
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments_string(call.arguments)},
    }


def chat_completion_body(ctx: ReplyContext, finished: Finished) -> bytes:
    message: dict[str, object] = {"role": "assistant", "content": finished.content}
    if finished.reasoning:
        message["reasoning_content"] = finished.reasoning
    if finished.tool_calls:
        calls = [_call(i, c) for i, c in enumerate(finished.tool_calls)]
        message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
    return json_body(
        {
            "id": ctx.reply_id,
            "object": "chat.completion",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": wire_finish(finished),
                    "logprobs": None
                    if finished.logprobs is None
                    else chat_logprobs_object(finished.logprobs),
                }
            ],
            "usage": openai_usage(finished.usage),
        }
    )


class ChatCompletionStream:
    def __init__(self, ctx: ReplyContext) -> None:
        self.ctx = ctx
        self.shown_calls = 0
        self.text_sent = ""
        self.reasoning_sent = ""
        self.scored: list[TokenLogprob] = []  # entries no chunk has carried yet

    def _chunk(self, delta: dict[str, object], finish: str | None = None) -> bytes:
        """A chunk; it carries the log-probabilities of the tokens scored since the
        last one (their text may come later: the lexer holds some back)."""
        choice: dict[str, object] = {"index": 0, "delta": delta, "finish_reason": finish}
        if self.scored:
            choice["logprobs"] = chat_logprobs_object(self.scored)
            self.scored = []
        return data_frame(
            {
                "id": self.ctx.reply_id,
                "object": "chat.completion.chunk",
                "created": self.ctx.created,
                "model": self.ctx.model,
                "choices": [choice],
            }
        )

    def open(self, ready: PromptReady | None = None) -> list[bytes]:
        return [self._chunk({"role": "assistant"})]

    def feed(self, event: ServedEvent) -> list[bytes]:
        if isinstance(event, TokenScored):
            self.scored.append(event.entry)
            return []
        if isinstance(event, ReasoningDelta) and event.text:
            self.reasoning_sent += event.text
            return [self._chunk({"reasoning_content": event.text})]
        if isinstance(event, TextDelta) and event.text:
            self.text_sent += event.text
            return [self._chunk({"content": event.text})]
        if isinstance(event, ToolCallOpened):
            self.shown_calls = max(self.shown_calls, event.index + 1)
            header = {
                "index": event.index,
                "id": event.call_id,
                "type": "function",
                "function": {"name": event.name, "arguments": ""},
            }
            return [self._chunk({"tool_calls": [header]})]
        if isinstance(event, ToolCallArguments) and event.fragment:
            fragment = {"index": event.index, "function": {"arguments": event.fragment}}
            return [self._chunk({"tool_calls": [fragment]})]
        if isinstance(event, Finished):
            return self._close(event)
        return []

    def _close(self, finished: Finished) -> list[bytes]:
        frames: list[bytes] = []
        # What the final parse holds beyond what streamed (e.g. a malformed block
        # returned as text) is sent now, so the streamed message equals the final one.
        reasoning = finished.reasoning or ""
        if reasoning.startswith(self.reasoning_sent) and len(reasoning) > len(self.reasoning_sent):
            frames.append(self._chunk({"reasoning_content": reasoning[len(self.reasoning_sent) :]}))
        if finished.content.startswith(self.text_sent) and len(finished.content) > len(
            self.text_sent
        ):
            frames.append(self._chunk({"content": finished.content[len(self.text_sent) :]}))
        rest = [_call(i, c) for i, c in enumerate(finished.tool_calls) if i >= self.shown_calls]
        if rest:
            frames.append(self._chunk({"tool_calls": rest}))
        frames.append(self._chunk({}, wire_finish(finished)))
        if self.ctx.include_usage:
            frames.append(
                data_frame(
                    {
                        "id": self.ctx.reply_id,
                        "object": "chat.completion.chunk",
                        "created": self.ctx.created,
                        "model": self.ctx.model,
                        "choices": [],
                        "usage": openai_usage(finished.usage),
                    }
                )
            )
        frames.append(DONE)
        return frames


def chat_context(
    parsed: ParsedRequest, sequence: int, created: int, random: RandomSource
) -> ReplyContext:
    """Ids chatcmpl-<n>, n the server's request sequence."""
    return ReplyContext(
        reply_id=f"chatcmpl-{sequence}",
        created=created,
        model=parsed.generation.model,
        include_usage=parsed.reply.include_usage,
    )
