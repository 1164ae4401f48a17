"""POST /v1/completions (docs/reference/server.md §3.6): the body, and generation events
to JSON and chunks.

A completion becomes a two-message chat whose rendering is byte-identical to the
reference's fixed completion template; the members it shares with chat completions
are read as chat reads them (chat.OpenAIBody). The legacy endpoint returns the raw
generated text: with thinking on (the default) that is the reasoning, `</think>`,
then the answer, as the reference does.
"""

from __future__ import annotations

from dataclasses import replace

import msgspec

from ds4.domain.chat import SystemMessage, UserMessage
from ds4.domain.dsml.syntax import THINK_CLOSE
from ds4.domain.errors import RequestError
from ds4.domain.generation.events import Finished, ReasoningDelta, TextDelta
from ds4.domain.serving.exchange import Api, PromptReady, ServedEvent
from ds4.ports.system import RandomSource
from ds4.wire.chat import OpenAIBody, openai_reply_options, openai_request, openai_think_mode_of
from ds4.wire.replies import DONE, ReplyContext, data_frame, json_body, openai_usage, wire_finish
from ds4.wire.requests import (
    ParsedRequest,
    check_choices,
    check_logprobs,
    check_tool_count,
    decode_body,
    present,
)

COMPLETION_SYSTEM = "You are a helpful assistant"


class CompletionBody(OpenAIBody):
    prompt: object = msgspec.UNSET
    best_of: object = None


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
    mode = openai_think_mode_of(completion)
    prompt = _prompt_text(completion.prompt)
    base = openai_request(completion, Api.COMPLETIONS, mode)
    messages = (SystemMessage(COMPLETION_SYSTEM), UserMessage(prompt))
    return ParsedRequest(replace(base, messages=messages), openai_reply_options(completion))


def raw_text(finished: Finished) -> str:
    if finished.text:
        return finished.text
    if finished.reasoning is not None:
        return finished.reasoning + THINK_CLOSE + finished.content
    return finished.content


def completion_body(ctx: ReplyContext, finished: Finished) -> bytes:
    return json_body(
        {
            "id": ctx.reply_id,
            "object": "text_completion",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [
                {"text": raw_text(finished), "index": 0, "finish_reason": wire_finish(finished)}
            ],
            "usage": openai_usage(finished.usage),
        }
    )


class CompletionStream:
    def __init__(self, ctx: ReplyContext) -> None:
        self.ctx = ctx
        self.sent = ""
        self.in_reasoning = False

    def _chunk(self, text: str, finish: str | None = None) -> bytes:
        return data_frame(
            {
                "id": self.ctx.reply_id,
                "object": "text_completion",
                "created": self.ctx.created,
                "model": self.ctx.model,
                "choices": [{"text": text, "index": 0, "finish_reason": finish}],
            }
        )

    def open(self, ready: PromptReady | None = None) -> list[bytes]:
        return []

    def _send(self, text: str) -> list[bytes]:
        self.sent += text
        return [self._chunk(text)] if text else []

    def feed(self, event: ServedEvent) -> list[bytes]:
        if isinstance(event, ReasoningDelta):
            self.in_reasoning = True
            return self._send(event.text)
        if isinstance(event, TextDelta):
            prefix = THINK_CLOSE if self.in_reasoning else ""
            self.in_reasoning = False
            return self._send(prefix + event.text)
        if isinstance(event, Finished):
            final = raw_text(event)
            frames = self._send(final[len(self.sent) :]) if final.startswith(self.sent) else []
            frames.append(self._chunk("", wire_finish(event)))
            if self.ctx.include_usage:
                frames.append(
                    data_frame(
                        {
                            "id": self.ctx.reply_id,
                            "object": "text_completion",
                            "created": self.ctx.created,
                            "model": self.ctx.model,
                            "choices": [],
                            "usage": openai_usage(event.usage),
                        }
                    )
                )
            frames.append(DONE)
            return frames
        return []


def completion_context(
    parsed: ParsedRequest, sequence: int, created: int, random: RandomSource
) -> ReplyContext:
    """Ids cmpl-<n>, n the server's request sequence."""
    return ReplyContext(
        reply_id=f"cmpl-{sequence}",
        created=created,
        model=parsed.generation.model,
        include_usage=parsed.reply.include_usage,
    )
