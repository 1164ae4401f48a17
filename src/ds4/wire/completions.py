"""POST /v1/completions (docs/reference/server.md §3.6): the body, and generation events
to JSON and chunks.

A completion becomes a two-message chat whose rendering is byte-identical to the
reference's fixed completion template; the members it shares with chat completions
are read as chat reads them (chat.OpenAIBody). The legacy endpoint returns the raw
generated text: with thinking on (the default) that is the reasoning, `</think>`,
then the answer, as the reference does. A prompt of token ids (`[1, 2, 3]` or
`[[1, 2, 3]]`) is evaluated as it is: no template, no thinking (what
lm-evaluation-harness sends). `logprobs` and `echo`: wire/logprobs.py.
"""

from __future__ import annotations

from dataclasses import replace

import msgspec

from ds4.domain.chat import SystemMessage, UserMessage
from ds4.domain.dsml.syntax import THINK_CLOSE
from ds4.domain.errors import RequestError
from ds4.domain.generation.events import Finished, ReasoningDelta, TextDelta, TokenScored
from ds4.domain.sampling import TokenLogprob
from ds4.domain.serving.exchange import Api, PromptReady, ServedEvent
from ds4.ports.system import RandomSource
from ds4.wire.chat import OpenAIBody, openai_reply_options, openai_request, openai_think_mode_of
from ds4.wire.logprobs import completion_logprobs, echoed_text, legacy_logprobs
from ds4.wire.replies import DONE, ReplyContext, data_frame, json_body, openai_usage, wire_finish
from ds4.wire.requests import (
    ParsedRequest,
    check_choices,
    check_tool_count,
    decode_body,
    present,
)

COMPLETION_SYSTEM = "You are a helpful assistant"


class CompletionBody(OpenAIBody):
    prompt: object = msgspec.UNSET
    best_of: object = None
    echo: object = None


def _prompt_text(value: object) -> str:
    if isinstance(value, list) and value and isinstance(value[0], str):
        return value[0]
    return value if isinstance(value, str) else ""


def _is_ids(value: object) -> bool:
    return isinstance(value, list) and all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    )


def _prompt_ids(value: object) -> tuple[int, ...] | None:
    """A token-id prompt: a non-empty list of integers, or a list holding one such
    list (one prompt per request, as for strings); None for a text prompt."""
    if isinstance(value, list) and len(value) == 1 and _is_ids(value[0]):
        value = value[0]
    if isinstance(value, list) and value and _is_ids(value):
        return tuple(value)
    if isinstance(value, list) and value and isinstance(value[0], list):
        raise RequestError("prompt: one token list per request", param="prompt")
    return None


def parse_completion(body: bytes) -> ParsedRequest:
    completion = decode_body(body, CompletionBody)
    check_tool_count(len(completion.tools or ()))
    if not present(completion.prompt):
        raise RequestError("missing prompt")
    check_choices({"n": completion.n, "best_of": completion.best_of})
    if completion.top_logprobs is not None:
        raise RequestError(
            "top_logprobs is a chat completions member; completions take logprobs: N",
            param="top_logprobs",
        )
    logprobs = completion_logprobs(completion.logprobs, completion.echo)
    mode = openai_think_mode_of(completion)
    base = replace(openai_request(completion, Api.COMPLETIONS, mode), logprobs=logprobs)
    options = replace(
        openai_reply_options(completion), logprobs=logprobs is not None and logprobs.completion
    )
    ids = _prompt_ids(completion.prompt)
    if ids is not None:
        return ParsedRequest(replace(base, prompt_ids=ids), options)
    prompt = _prompt_text(completion.prompt)
    messages = (SystemMessage(COMPLETION_SYSTEM), UserMessage(prompt))
    return ParsedRequest(replace(base, messages=messages), options)


def raw_text(finished: Finished) -> str:
    if finished.text:
        return finished.text
    if finished.reasoning is not None:
        return finished.reasoning + THINK_CLOSE + finished.content
    return finished.content


def _echo(prompt: tuple[TokenLogprob, ...] | None) -> str:
    return "" if prompt is None else echoed_text(prompt)


def completion_body(ctx: ReplyContext, finished: Finished) -> bytes:
    """With echo the text starts with the prompt as the model read it, and the
    log-probabilities list its tokens first."""
    prompt = finished.prompt_logprobs
    logprobs = None
    if ctx.logprobs:
        logprobs = legacy_logprobs([*(prompt or ()), *(finished.logprobs or ())])[0]
    choice = {
        "text": _echo(prompt) + raw_text(finished),
        "index": 0,
        "logprobs": logprobs,
        "finish_reason": wire_finish(finished),
    }
    return json_body(
        {
            "id": ctx.reply_id,
            "object": "text_completion",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [choice],
            "usage": openai_usage(finished.usage),
        }
    )


class CompletionStream:
    def __init__(self, ctx: ReplyContext) -> None:
        self.ctx = ctx
        self.sent = ""
        self.in_reasoning = False
        self.scored: list[TokenLogprob] = []  # entries no chunk has carried yet
        self.offset = 0  # text_offset of the next entry

    def _chunk(self, text: str, finish: str | None = None) -> bytes:
        choice: dict[str, object] = {"text": text, "index": 0, "finish_reason": finish}
        if self.ctx.logprobs:
            choice["logprobs"] = None
            if self.scored:
                choice["logprobs"], self.offset = legacy_logprobs(self.scored, self.offset)
                self.scored = []
        return data_frame(
            {
                "id": self.ctx.reply_id,
                "object": "text_completion",
                "created": self.ctx.created,
                "model": self.ctx.model,
                "choices": [choice],
            }
        )

    def open(self, ready: PromptReady | None = None) -> list[bytes]:
        """With echo, the first chunk is the prompt (and its tokens' logprobs)."""
        if ready is None or ready.prompt_logprobs is None:
            return []
        if self.ctx.logprobs:
            self.scored = list(ready.prompt_logprobs)
        return [self._chunk(_echo(ready.prompt_logprobs))]

    def _send(self, text: str) -> list[bytes]:
        self.sent += text
        return [self._chunk(text)] if text or self.scored else []

    def feed(self, event: ServedEvent) -> list[bytes]:
        if isinstance(event, TokenScored):
            self.scored.append(event.entry)
            return []
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
        logprobs=parsed.reply.logprobs,
    )
