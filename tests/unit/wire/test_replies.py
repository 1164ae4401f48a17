"""Event mappers: exact event names, shapes, ids and usage per API
(docs/reference/server.md §3.5–3.8)."""

from __future__ import annotations

import json
from typing import Any

from ds4.domain.dsml.syntax import ToolCall
from ds4.domain.errors import ContextLengthError
from ds4.domain.generation.events import (
    Finished,
    FinishReason,
    ReasoningDelta,
    TextDelta,
    ToolCallArguments,
    ToolCallFinished,
    Usage,
)
from ds4.domain.serving.exchange import Api, PromptReady, ToolCallOpened
from ds4.wire.anthropic import MessageStream, message_body
from ds4.wire.apis import anthropic_error_body, openai_error_body
from ds4.wire.chat import ChatCompletionStream, chat_completion_body
from ds4.wire.completions import CompletionStream, completion_body
from ds4.wire.replies import ReplyContext
from ds4.wire.requests import WireTool
from ds4.wire.responses_reply import ResponseStream, response_body

USAGE = Usage(prompt_tokens=10, cached_tokens=7, completion_tokens=2)
CALL = ToolCall("bash", '{"command":"ls"}', "call_x")


def frames_json(frames: list[bytes]) -> list[dict[str, Any]]:
    out = []
    for frame in b"".join(frames).decode().split("\n\n"):
        data = [line[6:] for line in frame.splitlines() if line.startswith("data: ")]
        if data and data[0] != "[DONE]":
            out.append(json.loads(data[0]))
    return out


def test_chat_stream_usage_and_tool_deltas_a52() -> None:
    stream = ChatCompletionStream(ReplyContext("chatcmpl-1", 0, "m", include_usage=True))
    frames = stream.open()
    for event in (
        ReasoningDelta("need a tool"),
        TextDelta("Hello."),
        ToolCallOpened(0, "bash", "call_x"),
        ToolCallArguments(0, "{"),
        ToolCallArguments(0, '"command":"ls"'),
        ToolCallArguments(0, "}"),
        Finished("tool_calls", "Hello.", "need a tool", (CALL,), USAGE),
    ):
        frames += stream.feed(event)
    chunks = frames_json(frames)
    assert b"".join(frames).endswith(b"data: [DONE]\n\n")
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0] == {"role": "assistant"}
    assert deltas[1] == {"reasoning_content": "need a tool"}
    assert deltas[3]["tool_calls"][0]["id"] == "call_x"
    args = "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas[3:7])
    assert json.loads(args) == {"command": "ls"}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    usage = chunks[-1]["usage"]
    assert usage == {
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "total_tokens": 12,
        "prompt_tokens_details": {"cached_tokens": 7, "cache_write_tokens": 3},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def test_anthropic_stream_blocks_and_usage_a48_a51() -> None:
    stream = MessageStream(ReplyContext("chatcmpl-9", 0, "m"))
    frames = stream.open(PromptReady(10, 7))
    for event in (
        ReasoningDelta("need a tool"),
        TextDelta("Hello."),
        ToolCallOpened(0, "bash", "toolu_x"),
        ToolCallArguments(0, '{"command":"ls"}'),
        ToolCallFinished(0, CALL),
        Finished(
            "tool_calls",
            "Hello.",
            "need a tool",
            (ToolCall("bash", '{"command":"ls"}', "toolu_x"),),
            USAGE,
        ),
    ):
        frames += stream.feed(event)
    events = frames_json(frames)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert events[0]["message"]["usage"] == {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_input_tokens": 7,
        "cache_creation_input_tokens": 3,
    }
    starts = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use"]  # the live call is not re-sent
    signature = [e for e in events if e.get("delta", {}).get("type") == "signature_delta"]
    assert signature[0]["delta"]["signature"] == "chatcmpl-9"
    assert events[-2]["delta"]["stop_reason"] == "tool_use"


def test_anthropic_body_thinking_only_gets_empty_text_block() -> None:
    body = json.loads(
        message_body(ReplyContext("id", 0, "m"), Finished("length", "", "half", (), USAGE))
    )
    assert [b["type"] for b in body["content"]] == ["thinking", "text"]
    assert body["stop_reason"] == "max_tokens"


def test_responses_stream_sequence_and_terminal_event() -> None:
    ids = {"rs": "rs_1", "msg": "msg_1", "fc0": "fc_1"}
    ctx = ReplyContext("resp_1", 0, "m", item_ids=ids, reasoning_summary=True)
    stream = ResponseStream(ctx)
    frames = stream.open()
    for event in (
        ReasoningDelta("plan"),
        TextDelta("ok"),
        Finished("tool_calls", "ok", "plan", (CALL,), USAGE),
    ):
        frames += stream.feed(event)
    events = frames_json(frames)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created"
    final = events[-1]
    assert final["type"] == "response.completed"
    output = final["response"]["output"]
    assert [item["type"] for item in output] == ["reasoning", "message", "function_call"]
    assert final["response"]["usage"]["input_tokens_details"] == {
        "cached_tokens": 7,
        "cache_write_tokens": 3,
    }


def test_responses_namespace_and_incomplete_status() -> None:
    wire = {"mcp__p__search": WireTool("search", "mcp__p__")}
    ctx = ReplyContext(
        "resp_1", 0, "m", item_ids={"rs": "rs", "msg": "msg", "fc0": "fc"}, wire_tools=wire
    )
    call = ToolCall("mcp__p__search", '{"q":"x"}', "call_1")
    body = json.loads(response_body(ctx, Finished("length", "", None, (call,), USAGE)))
    assert body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}  # as OpenAI's types
    item = body["output"][0]
    assert (item["name"], item["namespace"], item["status"]) == ("search", "mcp__p__", "incomplete")


def test_error_shapes_a54() -> None:
    error = ContextLengthError(16, 16)
    assert json.loads(openai_error_body(error, Api.CHAT)) == {
        "error": {
            "message": "Prompt has 16 tokens, but the configured context size is 16 tokens",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
            "n_prompt_tokens": 16,
            "n_ctx": 16,
        }
    }
    anthropic = json.loads(anthropic_error_body(ContextLengthError(20, 20)))
    assert anthropic["type"] == "error" and anthropic["error"]["n_prompt_tokens"] == 20


def sse_events(frames: list[bytes]) -> list[tuple[str | None, dict[str, Any]]]:
    """(event name, data) per frame, for streams with `event:` lines."""
    out = []
    for frame in b"".join(frames).decode().strip().split("\n\n"):
        lines = frame.splitlines()
        name = next((line[7:] for line in lines if line.startswith("event: ")), None)
        out.append(
            (name, json.loads(next(line[6:] for line in lines if line.startswith("data: "))))
        )
    return out


def responses_ctx(summary: bool) -> ReplyContext:
    ids = {"rs": "rs_1", "msg": "msg_1", "fc0": "fc_1"}
    return ReplyContext("resp_1", 0, "m", item_ids=ids, reasoning_summary=summary)


def test_responses_reasoning_only_turn_has_a_reasoning_item_without_summaries() -> None:
    stream = ResponseStream(responses_ctx(summary=False))
    frames = stream.open()
    for event in (
        ReasoningDelta("still "),
        ReasoningDelta("thinking"),
        Finished("length", "", "still thinking", (), USAGE),
    ):
        frames += stream.feed(event)
    events = frames_json(frames)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.incomplete",
    ]
    assert events[1]["item"] == {
        "id": "rs_1",
        "type": "reasoning",
        "status": "in_progress",
        "summary": [],
    }
    done = {"id": "rs_1", "type": "reasoning", "status": "incomplete", "summary": []}
    assert events[2]["item"] == done
    final = events[3]["response"]
    assert final["status"] == "incomplete"
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["output"] == [done]
    body = json.loads(response_body(responses_ctx(False), Finished("stop", "", "hmm", (), USAGE)))
    assert body["status"] == "completed"
    assert body["output"] == [
        {"id": "rs_1", "type": "reasoning", "status": "completed", "summary": []}
    ]


def test_responses_reasoning_item_with_summaries_carries_the_text() -> None:
    finished = Finished("length", "", "still thinking", (), USAGE)
    stream = ResponseStream(responses_ctx(summary=True))
    frames = stream.open()
    for event in (ReasoningDelta("still thinking"), finished):
        frames += stream.feed(event)
    events = frames_json(frames)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.incomplete",
    ]
    summary = [{"type": "summary_text", "text": "still thinking"}]
    assert events[-1]["response"]["output"][0]["summary"] == summary
    body = json.loads(response_body(responses_ctx(True), finished))
    assert body["output"][0]["summary"] == summary


def cut(finish: FinishReason) -> Finished:
    """A turn the server cut short a few tokens into the answer."""
    error = "engine broke" if finish == "error" else None
    return Finished(finish, "Hel", "plan", (), USAGE, error=error)


# (internal finish, Anthropic error type, message) of a turn the server cut short
CUTS: list[tuple[FinishReason, str, str]] = [
    ("cancelled", "overloaded_error", "server shutting down"),
    ("error", "api_error", "generation failed"),
]


def test_openai_finish_reason_of_a_cut_turn_is_length() -> None:
    for finish, _, _ in CUTS:
        body = json.loads(chat_completion_body(ReplyContext("chatcmpl-1", 0, "m"), cut(finish)))
        assert body["choices"][0]["finish_reason"] == "length"
        chat = ChatCompletionStream(ReplyContext("chatcmpl-1", 0, "m"))
        frames = chat.open() + chat.feed(TextDelta("Hel")) + chat.feed(cut(finish))
        assert frames_json(frames)[-1]["choices"][0]["finish_reason"] == "length"
        assert b"".join(frames).endswith(b"data: [DONE]\n\n")
        text = json.loads(completion_body(ReplyContext("cmpl-1", 0, "m"), cut(finish)))
        assert text["choices"][0]["finish_reason"] == "length"
        legacy = CompletionStream(ReplyContext("cmpl-1", 0, "m"))
        frames = legacy.open() + legacy.feed(TextDelta("Hel")) + legacy.feed(cut(finish))
        assert frames_json(frames)[-1]["choices"][0]["finish_reason"] == "length"


def test_anthropic_stream_cut_short_ends_with_an_error_event() -> None:
    for finish, kind, message in CUTS:
        stream = MessageStream(ReplyContext("msg_1", 0, "m"))
        frames = stream.open(PromptReady(10, 7))
        frames += stream.feed(TextDelta("Hel")) + stream.feed(cut(finish))
        events = sse_events(frames)
        names = [name for name, _ in events]
        assert names == [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",  # the open block is closed first
            "error",
        ]
        assert events[-1][1] == {"type": "error", "error": {"type": kind, "message": message}}
    body = json.loads(message_body(ReplyContext("msg_1", 0, "m"), cut("error")))
    assert body["stop_reason"] == "max_tokens"


def test_responses_turn_cut_short_fails_with_a_server_error() -> None:
    for finish, _, message in CUTS:
        stream = ResponseStream(responses_ctx(summary=False))
        frames = stream.open()
        for event in (ReasoningDelta("plan"), TextDelta("Hel"), cut(finish)):
            frames += stream.feed(event)
        events = frames_json(frames)
        final = events[-1]
        assert final["type"] == "response.failed"
        response = final["response"]
        assert response["status"] == "failed"
        assert response["error"] == {"code": "server_error", "message": message}
        assert "incomplete_details" not in response
        assert [item["status"] for item in response["output"]] == ["incomplete", "incomplete"]
