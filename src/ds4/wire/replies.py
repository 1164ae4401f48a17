"""Per-API choice of reply mapper and reply context (one place that switches on Api)."""

from __future__ import annotations

from typing import Protocol

from ds4.domain.generation.events import Finished
from ds4.domain.serving.exchange import Api, PromptReady, ServedEvent
from ds4.ports.random_source import RandomSource
from ds4.wire.anthropic_reply import MessageStream, message_body
from ds4.wire.completions_reply import CompletionStream, completion_body
from ds4.wire.openai_chat_reply import ChatCompletionStream, chat_completion_body
from ds4.wire.parsed_request import ParsedRequest
from ds4.wire.reply_context import ReplyContext
from ds4.wire.responses_reply import ResponseStream, response_body

MAX_ITEM_IDS = 64  # Responses call item ids drawn up front; later calls get fc_<index>


class StreamMapper(Protocol):
    def open(self, ready: PromptReady | None = None) -> list[bytes]: ...

    def feed(self, event: ServedEvent) -> list[bytes]: ...


def _hex_id(random: RandomSource, prefix: str) -> str:
    return prefix + random.token_bytes(12).hex()


def reply_context(
    parsed: ParsedRequest, sequence: int, created: int, random: RandomSource
) -> ReplyContext:
    """Ids: chatcmpl-<n>, cmpl-<n>; msg_ + 24 hex for Anthropic messages, as the real
    API's ids look (ADR 0044); resp_/rs_/msg_/fc_ + 24 hex for Responses."""
    request, options = parsed.generation, parsed.reply
    if request.api is Api.RESPONSES:
        item_ids = {"rs": _hex_id(random, "rs_"), "msg": _hex_id(random, "msg_")}
        return ReplyContext(
            reply_id=_hex_id(random, "resp_"),
            created=created,
            model=request.model,
            item_ids=item_ids | _CallIds(random),
            reasoning_summary=request.reasoning_summary,
            wire_tools=options.wire_tools,
        )
    if request.api is Api.ANTHROPIC:
        reply_id = _hex_id(random, "msg_")
    else:
        reply_id = f"{'cmpl-' if request.api is Api.COMPLETIONS else 'chatcmpl-'}{sequence}"
    return ReplyContext(
        reply_id=reply_id,
        created=created,
        model=request.model,
        include_usage=options.include_usage,
    )


class _CallIds(dict[str, str]):
    """fc_ ids for the first MAX_ITEM_IDS calls (drawn once, so stream and body agree)."""

    def __init__(self, random: RandomSource) -> None:
        super().__init__({f"fc{i}": _hex_id(random, "fc_") for i in range(MAX_ITEM_IDS)})


def stream_mapper(api: Api, ctx: ReplyContext) -> StreamMapper:
    if api is Api.CHAT:
        return ChatCompletionStream(ctx)
    if api is Api.COMPLETIONS:
        return CompletionStream(ctx)
    if api is Api.ANTHROPIC:
        return MessageStream(ctx)
    return ResponseStream(ctx)


def reply_body(api: Api, ctx: ReplyContext, finished: Finished) -> bytes:
    if api is Api.CHAT:
        return chat_completion_body(ctx, finished)
    if api is Api.COMPLETIONS:
        return completion_body(ctx, finished)
    if api is Api.ANTHROPIC:
        return message_body(ctx, finished)
    return response_body(ctx, finished)
