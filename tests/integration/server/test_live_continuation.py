"""Live tool continuation and visible-transcript bindings (docs/reference/server.md §5) through a
live scripted server: the client sends only what is new, the server continues from
the live state that still holds the hidden reasoning and the sampled DSML."""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from tests.integration.server.live_server import LiveServer, live_server, tool_call_dsml

from ds4.adapters.http.inference_worker import Job
from ds4.domain.chat import EOS
from ds4.domain.kvcache.kv_file import KvcFlags, decode_header
from ds4.domain.kvcache.policy import KvCacheOptions

TOOL_TURN = "I should list the files.</think>Let me look." + tool_call_dsml("ls", path="/tmp")
ANSWER = "Saw the listing.</think>The directory contains hello.txt."
LS_TOOL = {
    "type": "function",
    "name": "ls",
    "description": "List a directory",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}
ANTHROPIC_LS = {
    "name": "ls",
    "description": "List a directory",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}
DSML_TAIL = tool_call_dsml("ls", path="/tmp") + EOS
RESPONSES_GONE = (
    "Responses continuation state is not available; retry by replaying the full input history"
)


@contextmanager
def traced(tmp: Path, script: list[str]) -> Iterator[tuple[LiveServer, io.StringIO]]:
    trace = io.StringIO()
    with live_server(tmp, script, trace=trace, ctx=8192) as live:
        yield live, trace


def sources(trace: io.StringIO) -> list[str]:
    return re.findall(r"cache decision --- .*source=(\S+)", trace.getvalue())


def live_positions(trace: io.StringIO) -> list[int]:
    return [int(n) for n in re.findall(r"cache decision --- live=(\d+)", trace.getvalue())]


def post(server: LiveServer, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.base + path, json=body, timeout=60)


def responses_turn(server: LiveServer, items: list[Any], **extra: Any) -> httpx.Response:
    return post(server, "/responses", {"input": items, "tools": [LS_TOOL], **extra})


def anthropic_turn(server: LiveServer, content: Any) -> httpx.Response:
    body = {"max_tokens": 200, "tools": [ANTHROPIC_LS]}
    return post(server, "/messages", {**body, "messages": [{"role": "user", "content": content}]})


def test_responses_tool_outputs_alone_continue_from_the_live_state(tmp_path: Path) -> None:
    with traced(tmp_path, [TOOL_TURN, ANSWER]) as (server, trace):
        first = responses_turn(server, [{"role": "user", "content": "List /tmp"}])
        assert first.status_code == 200, first.text
        call = next(i for i in first.json()["output"] if i["type"] == "function_call")
        output = {"type": "function_call_output", "call_id": call["call_id"], "output": "a.txt"}
        second = responses_turn(server, [output])
        assert second.status_code == 200, second.text
        body = second.json()
        message = next(i for i in body["output"] if i["type"] == "message")
        assert message["content"][0]["text"] == "The directory contains hello.txt."
        live = live_positions(trace)[1]
        assert live > first.json()["usage"]["input_tokens"]
        assert body["usage"]["input_tokens_details"]["cached_tokens"] == live
        assert sources(trace) == ["none", "responses-tool-output"]
        assert "match=tool-output-ids ids=1" in trace.getvalue()


class GatedTrace(io.StringIO):
    """A trace that holds the worker inside the job whose rendered prompt has `marker`."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker
        self.reached = threading.Event()
        self.gate = threading.Event()

    def write(self, text: str) -> int:
        if self.marker in text and not self.reached.is_set():
            self.reached.set()
            self.gate.wait(30)
        return super().write(text)


def test_responses_tool_outputs_after_the_live_state_was_replaced_get_409(
    tmp_path: Path,
) -> None:
    """Parsed while the call id was live, run after another job replaced the state."""
    trace = GatedTrace("Unrelated")
    with live_server(tmp_path, [TOOL_TURN, "</think>Something else."], trace=trace) as server:
        first = responses_turn(server, [{"role": "user", "content": "List /tmp"}])
        call = next(i for i in first.json()["output"] if i["type"] == "function_call")
        output = {"type": "function_call_output", "call_id": call["call_id"], "output": "a.txt"}
        unrelated = {"messages": [{"role": "user", "content": "Unrelated"}]}
        replies: dict[str, httpx.Response] = {}

        def unrelated_chat() -> None:
            replies["other"] = post(server, "/chat/completions", unrelated)

        def refused_plain() -> None:
            replies["plain"] = responses_turn(server, [output])

        threads = [threading.Thread(target=unrelated_chat)]
        threads[0].start()
        assert trace.reached.wait(30)  # the worker holds the unrelated job, binding intact

        inference = server.built.state.inference
        submit, submitted = inference.submit, threading.Semaphore(0)

        def counting_submit(job: Job) -> None:
            submit(job)
            submitted.release()

        inference.submit = counting_submit  # type: ignore[method-assign]

        def refused_stream() -> None:
            body = {"input": [output], "tools": [LS_TOOL], "stream": True}
            with httpx.stream("POST", server.base + "/responses", json=body, timeout=60) as r:
                r.read()
                replies["stream"] = r

        threads += [
            threading.Thread(target=refused_plain),
            threading.Thread(target=refused_stream),
        ]
        for thread in threads[1:]:
            thread.start()
        assert submitted.acquire(timeout=30) and submitted.acquire(timeout=30)
        trace.gate.set()
        for thread in threads:
            thread.join(60)
        assert replies["other"].status_code == 200
        for name in ("plain", "stream"):
            assert replies[name].status_code == 409, replies[name].text
            assert replies[name].json()["error"]["message"] == RESPONSES_GONE


def test_responses_unknown_call_id_is_400(tmp_path: Path) -> None:
    with traced(tmp_path, [ANSWER]) as (server, trace):
        output = {"type": "function_call_output", "call_id": "call_nope", "output": "a.txt"}
        refused = responses_turn(server, [output])
        assert refused.status_code == 400
        assert refused.json()["error"]["message"] == (
            "Responses continuation state is not available for call_id call_nope; "
            "retry by replaying the full input history"
        )
        assert sources(trace) == []  # refused at parse time, never queued


def test_responses_full_replay_continues_through_the_visible_transcript(tmp_path: Path) -> None:
    with traced(tmp_path, [TOOL_TURN, ANSWER]) as (server, trace):
        user = {"role": "user", "content": "List /tmp"}
        summaries = {"reasoning": {"summary": "auto"}}
        first = responses_turn(server, [user], **summaries)
        replay = [user] + [
            {k: v for k, v in item.items() if k not in ("id", "status")}
            for item in first.json()["output"]
        ]
        call = replay[-1]
        replay.append({"type": "function_call_output", "call_id": call["call_id"], "output": "x"})
        second = responses_turn(server, replay, **summaries)
        assert second.status_code == 200, second.text
        assert sources(trace) == ["none", "responses-visible"]
        assert "match=visible-prefix ids=1" in trace.getvalue()


def test_anthropic_tool_result_continues_from_the_live_state(tmp_path: Path) -> None:
    with traced(tmp_path, [TOOL_TURN, ANSWER]) as (server, trace):
        first = anthropic_turn(server, "List /tmp")
        assert first.status_code == 200, first.text
        tool_use = next(b for b in first.json()["content"] if b["type"] == "tool_use")
        result = {"type": "tool_result", "tool_use_id": tool_use["id"], "content": "a.txt"}
        second = anthropic_turn(server, [result])
        assert second.status_code == 200, second.text
        assert second.json()["content"][-1]["text"] == "The directory contains hello.txt."
        assert second.json()["usage"]["cache_read_input_tokens"] == live_positions(trace)[1]
        assert sources(trace) == ["none", "anthropic-tool-output"]
        unknown = {"type": "tool_result", "tool_use_id": "toolu_nope", "content": "a.txt"}
        refused = anthropic_turn(server, [unknown])
        assert refused.status_code == 400
        assert refused.json()["type"] == "error"
        assert refused.json()["error"]["message"].startswith(
            "Anthropic continuation state is not available for tool_use_id toolu_nope"
        )


def test_toolless_thinking_chat_without_reasoning_continues_via_thinking_visible(
    tmp_path: Path,
) -> None:
    with traced(tmp_path, ["Two plus two.</think>4", "</think>Six."]) as (server, trace):
        history: list[dict[str, Any]] = [{"role": "user", "content": "2+2?"}]
        first = post(server, "/chat/completions", {"messages": history})
        assert first.status_code == 200, first.text
        answer = first.json()["choices"][0]["message"]["content"]
        assert answer == "4"
        history += [{"role": "assistant", "content": answer}, {"role": "user", "content": "3+3?"}]
        second = post(server, "/chat/completions", {"messages": history})
        assert second.status_code == 200, second.text
        cached = second.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert cached == live_positions(trace)[1]
        assert sources(trace) == ["none", "thinking-visible"]


def test_evicted_responses_state_is_keyed_by_its_visible_transcript(tmp_path: Path) -> None:
    """The hidden-reasoning state is saved under what the client will replay, so a
    restarted server restores it from the visible history
    (docs/reference/server.md §4.9, §5.6, §5.3)."""
    opts = KvCacheOptions(budget_bytes=0, min_tokens=16, cold_max_tokens=0)
    disk: dict[str, Any] = {"kv_disk_dir": str(tmp_path / "kv"), "kv_cache": opts, "ctx": 8192}
    user = {"role": "user", "content": "List /tmp"}
    summaries = {"reasoning": {"summary": "auto"}}
    with live_server(tmp_path, [TOOL_TURN, "</think>Other."], **disk) as server:
        first = responses_turn(server, [user], **summaries)
        other = post(server, "/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
        assert other.status_code == 200  # a full miss: the Responses state is evicted
    files = [p.read_bytes() for p in (tmp_path / "kv").glob("*.kv")]
    headers = [(decode_header(data[:48]), data) for data in files]
    visible = [
        data[52 : 52 + int.from_bytes(data[48:52], "little")].decode()
        for header, data in headers
        if header is not None and header.flags & KvcFlags.RESPONSES_VISIBLE
    ]
    assert len(visible) == 1
    assert visible[0].endswith("I should list the files.</think>Let me look." + DSML_TAIL)
    assert "<think>I should list the files.</think>" in visible[0]

    replay = [user] + [
        {k: v for k, v in item.items() if k not in ("id", "status")}
        for item in first.json()["output"]
    ]
    replay.append({"type": "function_call_output", "call_id": replay[-1]["call_id"], "output": "x"})
    trace = io.StringIO()
    with live_server(tmp_path, [ANSWER], trace=trace, **disk) as server:
        second = responses_turn(server, replay, **summaries)
        assert second.status_code == 200, second.text
    assert sources(trace) == ["disk-text"]
    assert "key=responses-visible" in trace.getvalue()
    assert "missing reasoning state" not in trace.getvalue()
