"""Generation events to OpenAI Responses JSON and event streams (docs/reference/server.md §3.6),
and the reply context with the ids a response carries; the request side is
responses_request.py.

Stream lifecycle: response.created; the reasoning item as soon as reasoning starts
(its summary events only when the client asked for summaries); message text events;
at the end the reasoning and message items are closed, each tool call is emitted whole
(function calls with their arguments events, custom tool calls with their input
events), and a terminal event (completed / incomplete / failed) carries the full
response. Statuses, reasons and the reasoning item follow
docs/adr/0047-responses-reasons-and-reasoning-only.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ds4.domain.dsml.syntax import ToolCall
from ds4.domain.generation.events import Finished, ReasoningDelta, TextDelta, TokenScored
from ds4.domain.sampling import TokenLogprob
from ds4.domain.serving.exchange import PromptReady, ServedEvent, cut_reason, cut_short
from ds4.ports.system import RandomSource
from ds4.wire.logprobs import openai_entry
from ds4.wire.replies import (
    ReplyContext,
    arguments_object,
    arguments_string,
    data_frame,
    hex_id,
    json_body,
    responses_usage,
)
from ds4.wire.requests import ParsedRequest, WireTool
from ds4.wire.responses_request import custom_call_input

ITEM_ID_KEYS = ("rs", "msg")  # ReplyContext.item_ids keys; calls use "fc<index>"


def _status(finished: Finished) -> str:
    """completed, incomplete (the budget ran out) or failed (the server cut the turn
    short: an engine failure or shutdown)."""
    if cut_short(finished):
        return "failed"
    return "incomplete" if finished.finish == "length" else "completed"


def _item_status(finished: Finished) -> str:
    return "completed" if _status(finished) == "completed" else "incomplete"


def reasoning_item(item_id: str, text: str, status: str, *, summary: bool) -> dict[str, object]:
    """The reasoning item; its text is the summary only when the client asked for
    summaries (`summary: []` otherwise, as OpenAI's API sends it)."""
    parts = [{"type": "summary_text", "text": text}] if text and summary else []
    return {"id": item_id, "type": "reasoning", "status": status, "summary": parts}


def text_part(text: str, logprobs: Sequence[TokenLogprob] | None) -> dict[str, object]:
    """An output_text part; with log-probabilities asked for (wire/logprobs.py), the
    entries of every token of the turn."""
    part: dict[str, object] = {"type": "output_text", "text": text, "annotations": []}
    if logprobs is not None:
        part["logprobs"] = [openai_entry(e) for e in logprobs]
    return part


def message_item(
    item_id: str, text: str, status: str, logprobs: Sequence[TokenLogprob] | None = None
) -> dict[str, object]:
    content = [text_part(text, logprobs)] if text else []
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def call_item(
    item_id: str, call: ToolCall, status: str, wire: Mapping[str, WireTool], *, final: bool = True
) -> dict[str, object]:
    tool = wire.get(call.name, WireTool(call.name))
    if tool.hosted_tool_search:
        return {
            "id": item_id,
            "type": "tool_search_call",
            "status": status,
            "call_id": call.id,
            "execution": "client",
            "arguments": arguments_object(call.arguments) if final else {},
        }
    if tool.custom:
        return {
            "id": "ctc_" + item_id.removeprefix("fc_"),
            "type": "custom_tool_call",
            "status": status,
            "name": tool.wire_name,
            "call_id": call.id,
            "input": custom_call_input(call.arguments) if final else "",
        }
    item: dict[str, object] = {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "name": tool.wire_name,
    }
    if tool.namespace:
        item["namespace"] = tool.namespace
    item["call_id"] = call.id
    item["arguments"] = arguments_string(call.arguments) if final else ""
    return item


def _response(
    ctx: ReplyContext, status: str, finished: Finished | None, output: list[dict[str, object]]
) -> dict[str, object]:
    body: dict[str, object] = {
        "id": ctx.reply_id,
        "object": "response",
        "created_at": ctx.created,
        "status": status,
        "model": ctx.model,
    }
    if status == "failed" and finished is not None:
        body["error"] = {"code": "server_error", "message": cut_reason(finished)}
    if status == "incomplete":
        body["incomplete_details"] = {"reason": "max_output_tokens"}
    body["output"] = output
    if finished is not None:
        body["usage"] = responses_usage(finished.usage)
    return body


def final_output(ctx: ReplyContext, finished: Finished) -> list[dict[str, object]]:
    status = _item_status(finished)
    output: list[dict[str, object]] = []
    if finished.reasoning:
        rs_id = ctx.item_ids["rs"]
        output.append(
            reasoning_item(rs_id, finished.reasoning, status, summary=ctx.reasoning_summary)
        )
    if finished.content:
        msg_id = ctx.item_ids["msg"]
        output.append(message_item(msg_id, finished.content, status, finished.logprobs))
    for index, call in enumerate(finished.tool_calls):
        item_id = ctx.item_ids.get(f"fc{index}", f"fc_{index}")
        output.append(call_item(item_id, call, status, ctx.wire_tools))
    return output


def response_body(ctx: ReplyContext, finished: Finished) -> bytes:
    return json_body(_response(ctx, _status(finished), finished, final_output(ctx, finished)))


class ResponseStream:
    def __init__(self, ctx: ReplyContext) -> None:
        self.ctx = ctx
        self.sequence = 0
        self.next_index = 0
        self.reasoning_index: int | None = None
        self.reasoning = ""
        self.message_index: int | None = None
        self.text = ""
        self.scored: list[TokenLogprob] = []  # every entry of the turn so far
        self.carried = 0  # how many of them a text delta has carried

    def _event(self, kind: str, payload: Mapping[str, object]) -> bytes:
        frame = data_frame({"type": kind, "sequence_number": self.sequence, **payload})
        self.sequence += 1
        return frame

    def open(self, ready: PromptReady | None = None) -> list[bytes]:
        return [
            self._event(
                "response.created", {"response": _response(self.ctx, "in_progress", None, [])}
            )
        ]

    def _rs(self) -> dict[str, object]:
        return {"item_id": self.ctx.item_ids["rs"], "output_index": self.reasoning_index}

    def _msg(self) -> dict[str, object]:
        return {"item_id": self.ctx.item_ids["msg"], "output_index": self.message_index}

    def _reasoning_delta(self, text: str) -> list[bytes]:
        """The reasoning item opens with the first reasoning; its text streams as
        summary events only when the client asked for summaries."""
        frames = []
        summary = self.ctx.reasoning_summary
        if self.reasoning_index is None:
            self.reasoning_index = self.next_index
            self.next_index += 1
            item = reasoning_item(self.ctx.item_ids["rs"], "", "in_progress", summary=summary)
            frames.append(
                self._event(
                    "response.output_item.added",
                    {"output_index": self.reasoning_index, "item": item},
                )
            )
            if summary:
                part: dict[str, object] = {"type": "summary_text", "text": ""}
                frames.append(
                    self._event(
                        "response.reasoning_summary_part.added",
                        {**self._rs(), "summary_index": 0, "part": part},
                    )
                )
        self.reasoning += text
        if summary:
            frames.append(
                self._event(
                    "response.reasoning_summary_text.delta",
                    {**self._rs(), "summary_index": 0, "delta": text},
                )
            )
        return frames

    def _text_delta(self, text: str) -> list[bytes]:
        frames = []
        if self.message_index is None:
            self.message_index = self.next_index
            self.next_index += 1
            item = message_item(self.ctx.item_ids["msg"], "", "in_progress")
            frames.append(
                self._event(
                    "response.output_item.added", {"output_index": self.message_index, "item": item}
                )
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            frames.append(
                self._event(
                    "response.content_part.added", {**self._msg(), "content_index": 0, "part": part}
                )
            )
        self.text += text
        delta: dict[str, object] = {**self._msg(), "content_index": 0, "delta": text}
        if len(self.scored) > self.carried:
            delta["logprobs"] = [openai_entry(e) for e in self.scored[self.carried :]]
            self.carried = len(self.scored)
        frames.append(self._event("response.output_text.delta", delta))
        return frames

    def feed(self, event: ServedEvent) -> list[bytes]:
        if isinstance(event, TokenScored):
            self.scored.append(event.entry)
            return []
        if isinstance(event, ReasoningDelta) and event.text:
            return self._reasoning_delta(event.text)
        if isinstance(event, TextDelta) and event.text:
            return self._text_delta(event.text)
        if isinstance(event, Finished):
            return self._close(event)
        return []

    def _close(self, finished: Finished) -> list[bytes]:
        frames: list[bytes] = []
        status = _item_status(finished)
        output: list[dict[str, object]] = []
        if self.reasoning_index is not None:
            full = self.reasoning
            rs_status = status if finished.reasoning is not None else "incomplete"
            summary = self.ctx.reasoning_summary
            if summary:
                frames.append(
                    self._event(
                        "response.reasoning_summary_text.done",
                        {**self._rs(), "summary_index": 0, "text": full},
                    )
                )
                part: dict[str, object] = {"type": "summary_text", "text": full}
                frames.append(
                    self._event(
                        "response.reasoning_summary_part.done",
                        {**self._rs(), "summary_index": 0, "part": part},
                    )
                )
            item = reasoning_item(self.ctx.item_ids["rs"], full, rs_status, summary=summary)
            frames.append(
                self._event(
                    "response.output_item.done",
                    {"output_index": self.reasoning_index, "item": item},
                )
            )
            output.append(item)
        content = finished.content
        if content.startswith(self.text) and len(content) > len(self.text):
            frames += self._text_delta(content[len(self.text) :])
        if self.message_index is not None:
            full = self.text
            frames.append(
                self._event(
                    "response.output_text.done", {**self._msg(), "content_index": 0, "text": full}
                )
            )
            logprobs = None if finished.logprobs is None else self.scored
            frames.append(
                self._event(
                    "response.content_part.done",
                    {**self._msg(), "content_index": 0, "part": text_part(full, logprobs)},
                )
            )
            item = message_item(self.ctx.item_ids["msg"], full, status, logprobs)
            frames.append(
                self._event(
                    "response.output_item.done", {"output_index": self.message_index, "item": item}
                )
            )
            output.append(item)
        for index, call in enumerate(finished.tool_calls):
            frames += self._call(index, call, status, output)
        kind = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(
            _status(finished), "response.failed"
        )
        frames.append(
            self._event(
                kind, {"response": _response(self.ctx, _status(finished), finished, output)}
            )
        )
        return frames

    def _call(
        self, index: int, call: ToolCall, status: str, output: list[dict[str, object]]
    ) -> list[bytes]:
        item_id = self.ctx.item_ids.get(f"fc{index}", f"fc_{index}")
        output_index = self.next_index
        self.next_index += 1
        wire = self.ctx.wire_tools
        added = call_item(item_id, call, "in_progress", wire, final=False)
        frames = [
            self._event("response.output_item.added", {"output_index": output_index, "item": added})
        ]
        done = call_item(item_id, call, status, wire)
        item_id = str(done["id"])
        if done["type"] == "custom_tool_call":
            where = {"item_id": item_id, "output_index": output_index}
            frames.append(
                self._event(
                    "response.custom_tool_call_input.delta", {**where, "delta": done["input"]}
                )
            )
            frames.append(
                self._event(
                    "response.custom_tool_call_input.done", {**where, "input": done["input"]}
                )
            )
        elif done["type"] == "function_call":
            arguments = done["arguments"]
            frames.append(
                self._event(
                    "response.function_call_arguments.delta",
                    {"item_id": item_id, "output_index": output_index, "delta": arguments},
                )
            )
            finished_args: dict[str, object] = {
                "item_id": item_id,
                "output_index": output_index,
                "name": done["name"],
            }
            if "namespace" in done:
                finished_args["namespace"] = done["namespace"]
            finished_args["arguments"] = arguments
            frames.append(self._event("response.function_call_arguments.done", finished_args))
        frames.append(
            self._event("response.output_item.done", {"output_index": output_index, "item": done})
        )
        output.append(done)
        return frames


MAX_ITEM_IDS = 64  # Responses call item ids drawn up front; later calls get fc_<index>


class _CallIds(dict[str, str]):
    """fc_ ids for the first MAX_ITEM_IDS calls (drawn once, so stream and body agree)."""

    def __init__(self, random: RandomSource) -> None:
        super().__init__({f"fc{i}": hex_id(random, "fc_") for i in range(MAX_ITEM_IDS)})


def response_context(
    parsed: ParsedRequest, sequence: int, created: int, random: RandomSource
) -> ReplyContext:
    """Ids resp_/rs_/msg_/fc_ + 24 hex digits, as the real API's ids look (ADR 0044)."""
    request, options = parsed.generation, parsed.reply
    item_ids = {"rs": hex_id(random, "rs_"), "msg": hex_id(random, "msg_")}
    return ReplyContext(
        reply_id=hex_id(random, "resp_"),
        created=created,
        model=request.model,
        item_ids=item_ids | _CallIds(random),
        reasoning_summary=request.reasoning_summary,
        wire_tools=options.wire_tools,
    )
