"""Worker.run, the server's central use case, over the composition root with fakes:
the cache decision order (live prefix, disk text prefix, cold prefill; the in-memory
checkpoints between them are in test_memory_reuse.py), the saves it
makes and where, cancellation while prefilling and decoding, tool continuation.

The byte tokenizer makes one token per byte, so positions can be read off the text.
"""

from __future__ import annotations

import json
from typing import Any

from tests.unit.serving.fake_server import (
    TOK,
    FakeServer,
    fake_server,
    finished,
    prompt_ready,
    texts,
)

from ds4.domain.generation.events import PrefillProgress, TextDelta
from ds4.domain.kvcache.kv_file import SaveReason
from ds4.domain.serving.exchange import ServedEvent
from ds4.domain.serving.prepare import PreparedJob

HELLO = "Hello there, friend."
REPLIES = {"hi": HELLO, "yo": "Yo.", "more": "Here is more."}
SYSTEM = {"role": "system", "content": "You are terse."}  # BOS + 14 bytes: anchor at 15
OTHER_SYSTEM = {"role": "system", "content": "You are verbose."}


def turn(role: str, content: str) -> dict[str, str]:
    return {"role": role, "content": content}


FIRST = [SYSTEM, turn("user", "hi")]
SECOND = [*FIRST, turn("assistant", HELLO), turn("user", "more")]


def run_counting(server: FakeServer, job: PreparedJob) -> tuple[list[ServedEvent], list[int]]:
    """Run a job; also return the tokens the engine evaluated for it."""
    before = len(server.compute.evaluated) if server.runner.sessions else 0
    events = server.run(job)
    return events, server.compute.evaluated[before:]


def payload_tokens(server: FakeServer, reason: SaveReason, tokens: int) -> list[int]:
    """The token history stored in one checkpoint (the fake engine's payload is JSON)."""
    assert server.store is not None
    (file,) = [
        f
        for f in server.store.files.values()
        if f.header.reason is reason and f.header.tokens == tokens
    ]
    ids: list[int] = json.loads(file.payload[len(b"FAKEDSV4") :])
    return ids


# ---- the cache decision ---------------------------------------------------------


def test_a_cold_prompt_is_prefilled_whole_and_saved_at_its_chat_anchor() -> None:
    server = fake_server(REPLIES)
    events, evaluated = run_counting(server, server.chat(FIRST))
    prompt = server.chat(FIRST).prompt_tokens
    assert texts(events) == HELLO and finished(events).finish == "stop"
    assert prompt_ready(events).cached_tokens == 0
    assert server.sources() == ["none"]
    assert evaluated == [*prompt, *TOK.encode(HELLO)]  # EOS is never evaluated
    assert (SaveReason.COLD, 15) in server.saved()
    assert payload_tokens(server, SaveReason.COLD, 15) == list(prompt[:15])  # before <User>


def test_a_follow_up_turn_continues_the_live_state_not_the_disk() -> None:
    server = fake_server(REPLIES)
    server.run(server.chat(FIRST))
    live = len(server.compute.tokens)
    job = server.chat(SECOND)
    events, evaluated = run_counting(server, job)
    assert server.sources() == ["none", "memory-token"]
    assert prompt_ready(events).cached_tokens == live
    assert prompt_ready(events).source == "memory-token"  # what the access log reports
    assert evaluated == [*job.prompt_tokens[live:], *TOK.encode("Here is more.")]
    assert "kv cache hit" not in server.trace.getvalue()


def test_a_switch_evicts_the_live_state_and_a_return_resumes_it_from_disk() -> None:
    server = fake_server(REPLIES, mem_bytes=0)  # the disk alone (memory: test_memory_reuse)
    server.run(server.chat(FIRST))
    first_live = len(server.compute.tokens)
    server.run(server.chat([OTHER_SYSTEM, turn("user", "yo")]))  # another conversation
    assert (SaveReason.EVICT, first_live) in server.saved()
    other_live = len(server.compute.tokens)
    job = server.chat(SECOND)
    events, evaluated = run_counting(server, job)
    assert server.sources() == ["none", "none", "disk-text"]
    assert (SaveReason.EVICT, other_live) in server.saved()  # saved before the load
    assert prompt_ready(events).cached_tokens == first_live
    assert prompt_ready(events).source == "disk-text"
    assert evaluated == [*job.prompt_tokens[first_live:], *TOK.encode("Here is more.")]


def test_a_disk_checkpoint_no_longer_than_the_shared_prefix_is_not_loaded() -> None:
    server = fake_server(REPLIES)
    server.run(server.chat(FIRST))  # stores the system prompt as a cold file (15 tokens)
    job = server.chat([SYSTEM, turn("user", "hey")])  # shares <BOS>system<User>h: 17
    events = server.run(job)
    assert server.sources() == ["none", "none"]
    assert prompt_ready(events).cached_tokens == 17  # rewound, not reloaded
    assert "kv cache hit" not in server.trace.getvalue()
    assert [r for r, _ in server.saved()].count(SaveReason.COLD) == 1  # the cut was live


def test_a_disk_checkpoint_beats_a_shared_prefix_the_live_state_cannot_reach() -> None:
    """The live state shares 17 tokens but can rewind exactly only to 0 (its history is
    bounded): the 15-token cold file is then worth loading (the Claude Code retry case)."""
    server = fake_server(REPLIES, rewind_step=64)
    server.run(server.chat(FIRST))
    events = server.run(server.chat([SYSTEM, turn("user", "hey")]))
    assert prompt_ready(events).source == "disk-text"
    assert prompt_ready(events).cached_tokens == 15


def test_without_a_disk_cache_a_miss_reuses_the_common_prefix() -> None:
    server = fake_server(REPLIES, disk=False)
    server.run(server.chat(FIRST))
    events = server.run(server.chat([SYSTEM, turn("user", "hey")]))
    assert server.sources() == ["none", "none"]
    assert prompt_ready(events).cached_tokens == 17


# ---- saves while prefilling and decoding -----------------------------------------


def test_continued_saves_land_on_exact_frontiers_while_decoding() -> None:
    long = "A long answer that runs well past several frontiers of sixteen."
    server = fake_server({"hi": long}, chunk=8)
    events = server.run(server.chat(FIRST))
    assert texts(events) == long
    final = list(server.compute.tokens)  # 20 prompt + 64 reply tokens
    continued = sorted(n for r, n in server.saved() if r is SaveReason.CONTINUED)
    # prefill checks its chunk ends (8, 15 = the cold cut, 20); decode every position
    assert continued == [32, 48, 64, 80]
    for n in continued:
        assert payload_tokens(server, SaveReason.CONTINUED, n) == final[:n]


def test_the_callers_on_token_sees_every_decoded_token_next_to_the_disk_saves() -> None:
    long = "A long answer that runs well past several frontiers of sixteen."
    server = fake_server({"hi": long}, chunk=8)
    seen: list[int] = []
    events = list(server.worker.run(server.chat(FIRST), on_token=seen.append))
    assert seen == TOK.encode(long) and finished(events).usage.completion_tokens == len(seen)
    assert sorted(n for r, n in server.saved() if r is SaveReason.CONTINUED) == [32, 48, 64, 80]


def test_continued_saves_stop_once_a_tool_call_begins() -> None:
    preamble = "Let me look at it first."
    reply = preamble + tool_call_dsml("ls", path="/tmp")
    server = fake_server({"hi": reply}, chunk=8)
    job = server.chat(FIRST, tools=[CHAT_LS])
    events = server.run(job)
    assert finished(events).finish == "tool_calls"
    marker = f"<{D}tool_calls>"
    upto_marker = reply[: reply.index(marker) + len(marker)]
    marker_end = len(job.prompt_tokens) + len(TOK.encode(upto_marker))
    continued = [n for r, n in server.saved() if r is SaveReason.CONTINUED]
    assert continued and max(continued) < marker_end < len(server.compute.tokens) - 16


# ---- cancellation ----------------------------------------------------------------


def test_cancel_during_prefill_stops_at_a_chunk_boundary_and_a_retry_reuses_it() -> None:
    server = fake_server(REPLIES, chunk=4)
    job = server.chat(FIRST)
    events: list[ServedEvent] = []
    for event in server.worker.run(job, cancel=lambda: bool(events)):
        events.append(event)
    assert events[0] == PrefillProgress(4, 15)  # toward the cold cut, four at a time
    done = finished(events)
    assert (done.finish, len(events)) == ("cancelled", 2)
    assert list(server.compute.tokens) == list(job.prompt_tokens[:4])
    assert server.saved() == []  # the cold cut was never reached
    retry = server.run(job)
    assert prompt_ready(retry).cached_tokens == 4 and texts(retry) == HELLO


def test_cancel_during_decode_ends_the_turn_at_the_next_token() -> None:
    server = fake_server(REPLIES, disk=False)
    job = server.chat(FIRST)
    events: list[ServedEvent] = []

    def text_seen() -> bool:
        return any(isinstance(e, TextDelta) for e in events)

    for event in server.worker.run(job, cancel=text_seen):
        events.append(event)
    done = finished(events)
    assert done.finish == "cancelled" and done.usage.completion_tokens == 1
    assert list(server.compute.tokens) == [*job.prompt_tokens, TOK.encode(HELLO)[0]]
    assert texts(server.run(job)) == HELLO  # the worker serves the next job as usual


# ---- tool continuation -----------------------------------------------------------

D = "｜DSML｜"
CHAT_LS = {
    "type": "function",
    "function": {
        "name": "ls",
        "description": "List a directory",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}
ANTHROPIC_LS = {
    "name": "ls",
    "description": "List a directory",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


def tool_call_dsml(name: str, **params: str) -> str:
    body = "".join(
        f'<{D}parameter name="{k}" string="true">{v}</{D}parameter>\n' for k, v in params.items()
    )
    return f'\n\n<{D}tool_calls>\n<{D}invoke name="{name}">\n{body}</{D}invoke>\n</{D}tool_calls>'


def test_a_tool_result_continues_from_the_live_state_that_made_the_call() -> None:
    reply = "I should list it.</think>Looking." + tool_call_dsml("ls", path="/tmp")
    answer = "Listed.</think>It holds a.txt."
    server = fake_server({"List /tmp": reply, "<tool_result>a.txt</tool_result>": answer})
    tools: dict[str, Any] = {"tools": [ANTHROPIC_LS]}
    first = server.run(server.anthropic([turn("user", "List /tmp")], **tools))
    (call,) = finished(first).tool_calls
    assert (call.name, finished(first).finish) == ("ls", "tool_calls")
    live = len(server.compute.tokens)
    result = {"type": "tool_result", "tool_use_id": call.id, "content": "a.txt"}
    job = server.anthropic([{"role": "user", "content": [result]}], **tools)
    events, evaluated = run_counting(server, job)
    assert server.sources() == ["none", "anthropic-tool-output"]
    assert prompt_ready(events).cached_tokens == live  # the sampled DSML and reasoning
    assert len(evaluated) == prompt_ready(events).prompt_tokens - live + len(TOK.encode(answer))
    assert texts(events) == "It holds a.txt."
