"""POST /v1/chat/completions and /v1/completions bodies (docs/reference/server.md §2.4, §3.6),
and `ds4 cli --render-chat FILE.json`, which reads a chat body the way the endpoint does.

Each body is decoded once (json_body.decode_body) into ChatBody or CompletionBody;
messages and tools go through chat_messages and the thinking controls through
thinking, the one implementation of those rules. Completions become a two-message
chat whose rendering is byte-identical to the reference's fixed completion template.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import msgspec

from ds4.domain.chat import (
    Message,
    SystemMessage,
    ThinkMode,
    ToolSchema,
    UserMessage,
    effective_think_mode,
    render_chat,
    unanswerable,
)
from ds4.domain.errors import Ds4Error, RequestError
from ds4.domain.serving.generation_request import Api, GenerationRequest
from ds4.wire.chat_messages import WireMessage, chat_messages, chat_schemas
from ds4.wire.json_body import InvalidJsonError, decode_body, present
from ds4.wire.models import DEFAULT_MODEL
from ds4.wire.parsed_request import ParsedRequest, ReplyOptions
from ds4.wire.request_fields import check_tool_count, clamp_int, sampling, stop_list
from ds4.wire.thinking import openai_think_mode
from ds4.wire.unsupported_fields import check_chat_content, check_choices, check_logprobs

COMPLETION_SYSTEM = "You are a helpful assistant"


class ChatRequestError(RequestError):
    """A chat body render_chat_request cannot render: unreadable (the message starts
    `invalid chat request:`), an unknown role, or nothing to answer; `param` names the
    field at fault when there is one."""


class _StreamOptions(msgspec.Struct):
    include_usage: bool | None = None


class _OpenAIBody(msgspec.Struct):
    """The members both endpoints read."""

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


class ChatBody(_OpenAIBody):
    messages: list[WireMessage] | msgspec.UnsetType = msgspec.UNSET
    tool_choice: object = None


class CompletionBody(_OpenAIBody):
    prompt: object = msgspec.UNSET
    best_of: object = None


@dataclass(frozen=True)
class ChatPrompt:
    """What a chat body asks the model: the conversation, tools and think mode."""

    messages: tuple[Message, ...]
    schemas: tuple[ToolSchema, ...]
    think_mode: ThinkMode  # as requested, before the context-size fallback


def _think_mode(body: _OpenAIBody) -> ThinkMode:
    return openai_think_mode(body.model, body.thinking, body.think, body.reasoning_effort)


def _chat_prompt(body: ChatBody, messages: list[WireMessage]) -> ChatPrompt:
    """Think mode, messages and schemas; RequestError when they cannot be read or the
    conversation has nothing to answer (renderer.unanswerable)."""
    think_mode = _think_mode(body)
    converted = chat_messages(messages)
    try:
        schemas = chat_schemas(body.tools, body.tool_choice)
    except Ds4Error as error:  # a tool schema that is not one
        raise InvalidJsonError(str(error)) from None
    problem = unanswerable(converted)
    if problem is not None:
        raise RequestError(f"messages: {problem}", param="messages")
    return ChatPrompt(converted, schemas, think_mode)


def _request(body: _OpenAIBody, api: Api, think_mode: ThinkMode) -> GenerationRequest:
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
    )


def _reply(body: _OpenAIBody) -> ReplyOptions:
    return ReplyOptions(
        include_usage=bool(body.stream_options and body.stream_options.include_usage)
    )


def parse_chat_completion(body: bytes) -> ParsedRequest:
    chat = decode_body(body, ChatBody)
    check_tool_count(len(chat.tools or ()))
    if isinstance(chat.messages, msgspec.UnsetType):
        raise RequestError("missing messages")
    check_choices({"n": chat.n})
    check_logprobs(chat.logprobs, chat.top_logprobs)
    check_chat_content([message.content for message in chat.messages])
    prompt = _chat_prompt(chat, chat.messages)
    base = _request(chat, Api.CHAT, prompt.think_mode)
    request = replace(base, messages=prompt.messages, schemas=prompt.schemas)
    return ParsedRequest(request, _reply(chat))


def _prompt_text(value: object) -> str:
    if isinstance(value, list) and value and isinstance(value[0], str):
        return value[0]
    return value if isinstance(value, str) else ""


def parse_completion(body: bytes) -> ParsedRequest:
    completion = decode_body(body, CompletionBody)
    check_tool_count(len(completion.tools or ()))
    if not present(completion.prompt):
        raise RequestError("missing prompt")
    check_choices({"n": completion.n, "best_of": completion.best_of})
    check_logprobs(completion.logprobs, completion.top_logprobs, completions=True)
    mode = _think_mode(completion)
    prompt = _prompt_text(completion.prompt)
    base = _request(completion, Api.COMPLETIONS, mode)
    messages = (SystemMessage(COMPLETION_SYSTEM), UserMessage(prompt))
    return ParsedRequest(replace(base, messages=messages), _reply(completion))


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
