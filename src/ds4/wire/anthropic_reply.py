"""Generation events to Anthropic Messages JSON and event streams (docs/reference/server.md §3.5).

Blocks open lazily, one at a time, indexed in opening order: thinking (closed with
a signature_delta carrying the message id), text, then one tool_use block per call
with input_json_delta fragments. Calls the live stream did not show are sent whole.
A stream the server cuts short (shutdown, an engine failure) ends as the real API ends
one: the open block is closed and an `error` event follows, no message_delta
(docs/adr/0047-responses-reasons-and-reasoning-only.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from ds4.domain.generation.events import (
    Finished,
    ReasoningDelta,
    TextDelta,
    ToolCallArguments,
    ToolCallFinished,
    Usage,
)
from ds4.domain.serving.exchange import (
    PromptReady,
    ServedEvent,
    ToolCallOpened,
    cut_kind,
    cut_reason,
    cut_short,
)
from ds4.wire.errors import stream_error_frame
from ds4.wire.reply_context import ReplyContext, arguments_object, arguments_string
from ds4.wire.sse import event_frame, json_body
from ds4.wire.usage import anthropic_usage

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
