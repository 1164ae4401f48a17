"""Generation events to /v1/completions JSON and chunks (docs/reference/server.md §3.6).

The legacy endpoint returns the raw generated text: with thinking on (the default)
that is the reasoning, `</think>`, then the answer, as the reference does.
"""

from __future__ import annotations

from ds4.domain.dsml.syntax import THINK_CLOSE
from ds4.domain.generation.events import Finished, ReasoningDelta, TextDelta
from ds4.domain.serving.exchange import PromptReady, ServedEvent
from ds4.wire.finish_reason import wire_finish
from ds4.wire.reply_context import ReplyContext
from ds4.wire.sse import DONE, data_frame, json_body
from ds4.wire.usage import openai_usage


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
