"""Issue 15 item 3 through the real openai and anthropic SDKs against a live scripted
server: unknown roles and conversations with nothing to answer are each API's 400,
Responses reasons and reasoning-only outputs, and how a stream cut by shutdown ends
(docs/adr/0047-responses-reasons-and-reasoning-only.md)."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from tests.integration.server.live_server import LiveServer, live_server, tool_call_dsml

REASONING_ONLY = "I thought it through and have nothing to add.</think>"
HI = [{"role": "user", "content": "hi"}]
LONG_ANSWER = "</think>" + "word " * 400  # 0.01 s a token: seconds of stream to cut


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("srv"), [REASONING_ONLY]) as live:
        yield live


def oai_client(server: LiveServer) -> Any:  # SDK overloads are too narrow for raw dicts
    return openai.OpenAI(base_url=server.base, api_key="unused", max_retries=0)


def claude_client(server: LiveServer) -> Any:
    return anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0)


def test_unknown_roles_are_each_apis_400(server: LiveServer) -> None:
    oai, claude = oai_client(server), claude_client(server)
    with pytest.raises(openai.BadRequestError) as chat:
        oai.chat.completions.create(model="m", messages=[*HI, {"role": "critic", "content": "x"}])
    assert chat.value.body == {
        "message": "messages[1].role: unknown role 'critic' (expected system, developer, user, "
        "assistant, tool, function)",
        "type": "invalid_request_error",
        "param": "messages",
    }
    with pytest.raises(anthropic.BadRequestError) as messages:
        claude.messages.create(
            model="m", max_tokens=10, messages=[*HI, {"role": "critic", "content": "x"}]
        )
    assert messages.value.body == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "messages.1.role: unknown role 'critic' (expected user, assistant, "
            "system, developer)",
        },
    }
    with pytest.raises(openai.BadRequestError) as responses:
        oai.responses.create(model="m", input=[*HI, {"role": "critic", "content": "x"}])
    body: Any = responses.value.body
    assert body["message"].startswith("input[1].role: unknown role 'critic'")
    assert body["param"] == "input"


def test_nothing_to_answer_is_each_apis_400(server: LiveServer) -> None:
    oai, claude = oai_client(server), claude_client(server)
    ending = [*HI, {"role": "assistant", "content": "hello"}]
    with pytest.raises(openai.BadRequestError, match="messages: nothing to answer"):
        oai.chat.completions.create(model="m", messages=ending)
    with pytest.raises(openai.BadRequestError, match="messages: empty"):
        oai.chat.completions.create(model="m", messages=[])
    with pytest.raises(anthropic.BadRequestError, match="messages: nothing to answer"):
        claude.messages.create(model="m", max_tokens=10, messages=ending)
    with pytest.raises(openai.BadRequestError, match="input: nothing to answer"):
        oai.responses.create(model="m", input=ending)
    # count_tokens counts a conversation that ends with the assistant's turn
    counted = claude.messages.count_tokens(model="m", messages=ending)
    assert counted.input_tokens > 0


def test_responses_reasoning_only_turn_without_summaries(server: LiveServer) -> None:
    oai = oai_client(server)
    response = oai.responses.create(model="m", input="hi")
    assert response.status == "completed" and response.output_text == ""
    (item,) = response.output
    assert (item.type, item.status, item.summary) == ("reasoning", "completed", [])
    assert item.id.startswith("rs_")

    with oai.responses.stream(model="m", input="hi") as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    assert kinds == [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    assert [item.type for item in final.output] == ["reasoning"]
    assert final.output[0].summary == []


def test_responses_budget_spent_in_reasoning_is_incomplete_max_output_tokens(
    server: LiveServer,
) -> None:
    oai = oai_client(server)
    response = oai.responses.create(model="m", input="hi", max_output_tokens=3)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    (item,) = response.output
    assert (item.type, item.status) == ("reasoning", "incomplete")

    summarized = oai.responses.create(
        model="m", input="hi", max_output_tokens=3, reasoning={"summary": "auto"}
    )
    assert summarized.output[0].summary[0].text  # the reasoning so far, as its summary

    events = list(oai.responses.create(model="m", input="hi", max_output_tokens=3, stream=True))
    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.incomplete_details.reason == "max_output_tokens"


def test_responses_summary_less_reasoning_item_replays_and_the_turn_continues_live(
    tmp_path: Path,
) -> None:
    """What Codex does with every output item: send it back in the next input. The
    summary-less item adds no text, so the remembered transcript (docs/reference/server.md §5.3)
    still matches and the second turn continues from the live state."""
    tool_turn = "I should list files.</think>Listing." + tool_call_dsml("bash", command="ls")
    tools = [{"type": "function", "name": "bash", "parameters": {"type": "object"}}]
    trace = io.StringIO()
    with live_server(tmp_path, [tool_turn, "Seen.</think>Two files."], trace) as live:
        oai = oai_client(live)
        first = oai.responses.create(model="m", input=HI, tools=tools)
        assert [item.type for item in first.output] == ["reasoning", "message", "function_call"]
        assert first.output[0].summary == []
        call = first.output[2]
        replay = [
            *HI,
            *(item.model_dump(exclude_none=True) for item in first.output),
            {"type": "function_call_output", "call_id": call.call_id, "output": "a b"},
        ]
        second = oai.responses.create(model="m", input=replay, tools=tools)
    assert second.status == "completed" and second.output_text == "Two files."
    assert re.findall(r"source=(\S+)", trace.getvalue())[-1].startswith("responses-")
    assert second.usage is not None and first.usage is not None
    assert second.usage.input_tokens_details.cached_tokens > first.usage.input_tokens


@pytest.fixture
def slow_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A fresh server per test: stopping it is the point."""
    with live_server(tmp_path, [LONG_ANSWER], script_token_delay=0.01) as live:
        yield live


def shut_down(server: LiveServer) -> None:
    """What SIGINT/SIGTERM does to the job queue (serve.Ds4Server.handle_exit)."""
    server.built.state.inference.begin_stop()


def test_chat_stream_cut_by_shutdown_ends_with_length(slow_server: LiveServer) -> None:
    stream = oai_client(slow_server).chat.completions.create(
        model="m", messages=HI, stream=True, stream_options={"include_usage": True}
    )
    finishes, content, usage = [], "", None
    for chunk in stream:  # the SDK parses the whole ending, [DONE] included
        for choice in chunk.choices:
            content += choice.delta.content or ""
            if choice.finish_reason is not None:
                finishes.append(choice.finish_reason)
        if content and not finishes and len(content) < 10:
            shut_down(slow_server)
        usage = chunk.usage or usage
    assert finishes == ["length"]
    assert 0 < len(content) < len(LONG_ANSWER) - len("</think>")
    assert usage is not None and usage.completion_tokens > 0


def test_completions_stream_cut_by_shutdown_ends_with_length(slow_server: LiveServer) -> None:
    stream = oai_client(slow_server).completions.create(model="m", prompt="go", stream=True)
    finishes, text = [], ""
    for chunk in stream:
        text += chunk.choices[0].text
        if chunk.choices[0].finish_reason is not None:
            finishes.append(chunk.choices[0].finish_reason)
        elif "word" in text and len(text) < 30:
            shut_down(slow_server)
    assert finishes == ["length"]


def test_anthropic_stream_cut_by_shutdown_ends_with_an_overloaded_error_event(
    slow_server: LiveServer,
) -> None:
    text = ""
    client = claude_client(slow_server)
    with (
        pytest.raises(anthropic.APIStatusError) as error,  # how the SDK reports `error`
        client.messages.stream(model="m", max_tokens=2000, messages=HI) as stream,
    ):
        for chunk in stream.text_stream:
            text += chunk
            if len(text) < 10:
                shut_down(slow_server)
    assert error.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "server shutting down"},
    }
    assert text.startswith("word")


def test_responses_stream_cut_by_shutdown_fails_with_a_server_error(
    slow_server: LiveServer,
) -> None:
    events = []
    with oai_client(slow_server).responses.stream(model="m", input="hi") as stream:
        for event in stream:  # the helper's own consistency checks run on every event
            events.append(event)
            if event.type == "response.output_text.delta" and len(events) < 8:
                shut_down(slow_server)
    last = events[-1]
    assert last.type == "response.failed"
    assert last.response.status == "failed"
    assert last.response.error is not None
    assert (last.response.error.code, last.response.error.message) == (
        "server_error",
        "server shutting down",
    )
    assert [item.status for item in last.response.output] == ["incomplete"]
