"""Generation events to OpenAI chat completion JSON and chunk streams
(docs/reference/server.md §3.5).

Reasoning goes to `reasoning_content`; tool calls stream live (header with id and
name, then argument fragments); calls the live stream did not show are sent whole at
the end, so every parsed call reaches the client exactly once.
"""

from __future__ import annotations

from ds4.domain.dsml.syntax import ToolCall
from ds4.domain.generation.events import (
    Finished,
    ReasoningDelta,
    TextDelta,
    ToolCallArguments,
)
from ds4.domain.serving.served_events import PromptReady, ServedEvent, ToolCallOpened
from ds4.wire.finish_reason import wire_finish
from ds4.wire.reply_context import ReplyContext, arguments_string
from ds4.wire.sse import DONE, data_frame, json_body
from ds4.wire.usage import openai_usage


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
            "choices": [{"index": 0, "message": message, "finish_reason": wire_finish(finished)}],
            "usage": openai_usage(finished.usage),
        }
    )


class ChatCompletionStream:
    def __init__(self, ctx: ReplyContext) -> None:
        self.ctx = ctx
        self.shown_calls = 0
        self.text_sent = ""
        self.reasoning_sent = ""

    def _chunk(self, delta: dict[str, object], finish: str | None = None) -> bytes:
        return data_frame(
            {
                "id": self.ctx.reply_id,
                "object": "chat.completion.chunk",
                "created": self.ctx.created,
                "model": self.ctx.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    def open(self, ready: PromptReady | None = None) -> list[bytes]:
        return [self._chunk({"role": "assistant"})]

    def feed(self, event: ServedEvent) -> list[bytes]:
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
