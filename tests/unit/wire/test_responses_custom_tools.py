"""Responses freeform custom tools (ADR 0043): the tool as the model sees it, replayed
`custom_tool_call` / `custom_tool_call_output` items, and `custom_tool_call` output
items with their `response.custom_tool_call_input.*` events."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ds4.domain.chat import AssistantMessage, ThinkMode, ToolResultMessage, render_chat
from ds4.domain.dsml.parser import finish_turn
from ds4.domain.dsml.syntax import ToolCall, render_tool_calls
from ds4.domain.errors import RequestError
from ds4.domain.generation.events import Finished, Usage
from ds4.domain.serving.exchange import GenerationRequest
from ds4.wire.replies import ReplyContext, http_status
from ds4.wire.requests import ParsedRequest
from ds4.wire.responses_reply import ResponseStream, response_body
from ds4.wire.responses_request import custom_call_input, parse_responses

D = "｜DSML｜"
GRAMMAR = 'start: "*** Begin Patch" LF hunk+ "*** End Patch"'
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files with a patch.",
    "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR},
}
PATCH = '*** Begin Patch\n*** Update File: a.py\n-x = "<a> & b"\n+x = 1\n*** End Patch'
USAGE = Usage(prompt_tokens=10, cached_tokens=0, completion_tokens=2)


def parsed_request(items: object, tools: list[Any] | None = None) -> ParsedRequest:
    body = {"input": items, "tools": [APPLY_PATCH] if tools is None else tools}
    return parse_responses(json.dumps(body).encode())


def request(items: object, tools: list[Any] | None = None) -> GenerationRequest:
    return parsed_request(items, tools).generation


def context(wire: Any) -> ReplyContext:
    ids = {"rs": "rs_1", "msg": "msg_1", "fc0": "fc_0a1b"}
    return ReplyContext("resp_1", 0, "m", item_ids=ids, wire_tools=wire)


def test_custom_tool_is_a_function_with_one_string_parameter() -> None:
    parsed = parsed_request("patch it")
    (schema,) = parsed.generation.schemas
    line = json.loads(schema.line)
    assert line["name"] == "apply_patch" and line["description"] == "Edit files with a patch."
    assert line["parameters"]["required"] == ["arguments"]
    hint = line["parameters"]["properties"]["arguments"]
    assert hint["type"] == "string" and hint["description"].endswith("lark grammar:\n" + GRAMMAR)
    assert parsed.reply.wire_tools["apply_patch"].custom
    plain = parsed_request("x", [{"type": "custom", "name": "note"}])
    assert "plain text" in plain.generation.schemas[0].line
    assert plain.reply.wire_tools["note"].custom


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        ({"type": "custom"}, "non-empty string 'name'"),
        ({"type": "custom", "name": 7}, "non-empty string 'name'"),
        ({"type": "custom", "name": "t", "description": 1}, "'description' must be a string"),
        ({"type": "custom", "name": "t", "format": "lark"}, "format must be an object"),
        ({"type": "custom", "name": "t", "format": {"type": "xml"}}, "format type 'xml'"),
        (
            {"type": "custom", "name": "t", "format": {"type": "grammar", "syntax": "ebnf"}},
            "grammar syntax 'ebnf'",
        ),
        (
            {"type": "custom", "name": "t", "format": {"type": "grammar", "syntax": "regex"}},
            "non-empty string 'definition'",
        ),
    ],
)
def test_bad_custom_tools_are_a_400(tool: dict[str, Any], message: str) -> None:
    with pytest.raises(RequestError, match=message) as refused:
        request("x", [tool])
    assert http_status(refused.value.kind) == 400 and refused.value.message.startswith(
        "invalid JSON"
    )


def test_replayed_custom_call_renders_like_the_spec_mapping_of_its_input() -> None:
    parsed = request(
        [
            {"role": "user", "content": "fix a.py"},
            {
                "type": "custom_tool_call",
                "call_id": "call_p",
                "name": "apply_patch",
                "input": PATCH,
            },
            {
                "type": "custom_tool_call_output",
                "call_id": "call_p",
                "output": [{"type": "input_text", "text": "Done!"}],
            },
        ]
    )
    assistant, result = parsed.messages[1], parsed.messages[2]
    assert isinstance(assistant, AssistantMessage)
    (call,) = assistant.tool_calls
    assert (call.name, call.id, json.loads(call.arguments)) == (
        "apply_patch",
        "call_p",
        {"arguments": PATCH},
    )
    assert result == ToolResultMessage("Done!", tool_call_id="call_p")
    # docs/reference/server.md §2.7 takes `input` as the arguments text and
    # docs/reference/chat-and-dsml.md §3.2 renders such non-object arguments as one string parameter
    # named "arguments": same bytes
    assert render_tool_calls([call]) == render_tool_calls([ToolCall("apply_patch", PATCH)])
    prompt = render_chat(parsed.messages, parsed.schemas, ThinkMode.HIGH)
    assert f'<{D}parameter name="arguments" string="true">{PATCH}</{D}parameter>' in prompt


def test_custom_input_that_looks_like_json_stays_one_parameter() -> None:
    item = {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": '{"a":1}'}
    output = {"type": "custom_tool_call_output", "call_id": "c", "output": "ok"}
    message = request([item, output]).messages[0]
    assert isinstance(message, AssistantMessage)
    (call,) = message.tool_calls
    assert '<｜DSML｜parameter name="arguments" string="true">{"a":1}<' in render_tool_calls([call])


@pytest.mark.parametrize(
    "item",
    [
        {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": 3},
        {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": ["x"]},
        {"type": "custom_tool_call_output", "call_id": "c", "output": [{"type": "input_image"}]},
        {
            "type": "custom_tool_call",
            "call_id": "c",
            "name": "p",
            "input": "x",
            "status": "pending",
        },
    ],
)
def test_bad_custom_items_are_a_400(item: dict[str, Any]) -> None:
    with pytest.raises(RequestError) as refused:
        request([{"role": "user", "content": "x"}, item])
    assert http_status(refused.value.kind) == 400


def test_custom_call_input_comes_back_out_of_the_parsed_call() -> None:
    text = (
        "Patching.\n\n"
        f'<{D}tool_calls>\n<{D}invoke name="apply_patch">\n'
        f'<{D}parameter name="arguments" string="true">{PATCH}</{D}parameter>\n'
        f"</{D}invoke>\n</{D}tool_calls>"
    )
    turn = finish_turn(text, tools_active=True, thinking=False, finish="tool_calls")
    (call,) = turn.calls
    assert custom_call_input(call.arguments) == PATCH
    assert custom_call_input('{"patch":"p"}') == "p"  # the model named it otherwise
    assert custom_call_input('{"a":"p","b":1}') == '{"a":"p","b":1}'
    assert custom_call_input("raw") == "raw"


def test_non_streamed_custom_tool_call_item() -> None:
    wire = parsed_request("x").reply.wire_tools
    call = ToolCall("apply_patch", json.dumps({"arguments": PATCH}), "call_9")
    finished = Finished("tool_calls", "Patching.", None, (call,), USAGE)
    body = json.loads(response_body(context(wire), finished))
    item = body["output"][-1]
    assert item == {
        "id": "ctc_0a1b",
        "type": "custom_tool_call",
        "status": "completed",
        "name": "apply_patch",
        "call_id": "call_9",
        "input": PATCH,
    }


def test_streamed_custom_tool_call_events() -> None:
    wire = parsed_request("x").reply.wire_tools
    call = ToolCall("apply_patch", json.dumps({"arguments": PATCH}), "call_9")
    stream = ResponseStream(context(wire))
    frames = stream.open() + stream.feed(Finished("tool_calls", "", None, (call,), USAGE))
    events = [json.loads(f.decode()[6:]) for f in frames]
    assert [e["type"] for e in events] == [
        "response.created",
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    added, delta, done, item_done, completed = events[1:]
    assert added["item"]["input"] == "" and added["item"]["status"] == "in_progress"
    assert delta == {
        "type": "response.custom_tool_call_input.delta",
        "sequence_number": 2,
        "item_id": "ctc_0a1b",
        "output_index": 0,
        "delta": PATCH,
    }
    assert (done["item_id"], done["output_index"], done["input"]) == ("ctc_0a1b", 0, PATCH)
    assert item_done["item"]["input"] == PATCH
    assert completed["response"]["output"] == [item_done["item"]]
