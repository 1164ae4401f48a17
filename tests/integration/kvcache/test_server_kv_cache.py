"""The disk KV cache behind a live server (scripted backend): restarts, switches,
budget, corrupt files, continued frontiers and tool ids across a restart."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.integration.server.live_server import LiveServer, live_server, tool_call_dsml

from ds4.adapters.storage.kv_disk_store import DiskKVStore
from ds4.domain.kvcache.kv_file import KvcFlags, SaveReason
from ds4.domain.kvcache.policy import KvCacheOptions

OPTS = KvCacheOptions(
    budget_bytes=0,
    min_tokens=16,
    cold_max_tokens=30000,
    continued_interval_tokens=0,
    boundary_trim_tokens=0,
    boundary_align_tokens=16,
)
SYSTEM = "You are a careful assistant who answers briefly. " * 4
REPLIES = ["The answer is forty two.", "Paris is the capital.", "Blue, mostly.", "Done."]


def conversation(*turns: str) -> list[dict[str, str]]:
    roles = ("user", "assistant")
    return [{"role": "system", "content": SYSTEM}] + [
        {"role": roles[i % 2], "content": text} for i, text in enumerate(turns)
    ]


@contextmanager
def server(
    tmp: Path, script: list[str], trace: io.StringIO, **overrides: Any
) -> Iterator[LiveServer]:
    options: dict[str, Any] = {"kv_disk_dir": str(tmp / "kv"), "kv_cache": OPTS}
    with live_server(tmp, script, trace=trace, **{**options, **overrides}) as live:
        yield live


def chat(live: LiveServer, messages: list[dict[str, str]], **extra: Any) -> dict[str, Any]:
    body = {"messages": messages, "max_tokens": 64, "think": False, **extra}
    response = httpx.post(live.base + "/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def cached(reply: dict[str, Any]) -> int:
    return int(reply["usage"]["prompt_tokens_details"]["cached_tokens"])


def decisions(trace: io.StringIO) -> list[str]:
    return re.findall(r"source=(\S+)", trace.getvalue())


def evaluated(trace: io.StringIO) -> list[int]:
    return [
        int(n) for n in re.findall(r"prefill done --- cached=\d+ evaluated=(\d+)", trace.getvalue())
    ]


def kv_files(tmp: Path) -> list[Path]:
    return sorted((tmp / "kv").glob("*.kv"))


def test_restart_resumes_the_conversation_from_disk(tmp_path: Path) -> None:
    first_trace, second_trace = io.StringIO(), io.StringIO()
    with server(tmp_path, [REPLIES[0]], first_trace) as live:
        first = chat(live, conversation("What is six times seven?"))
    answer = first["choices"][0]["message"]["content"]
    assert answer == REPLIES[0] and cached(first) == 0
    log = first_trace.getvalue()
    assert "kv cache stored reason=cold" in log and "kv cache stored reason=shutdown" in log
    live_tokens = first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"]

    with server(tmp_path, [REPLIES[1]], second_trace) as live:
        second = chat(live, conversation("What is six times seven?", answer, "And France?"))
    assert second["choices"][0]["message"]["content"] == REPLIES[1]
    # the shutdown checkpoint (prompt + sampled reply) is reused; only the suffix is prefilled
    assert cached(second) == live_tokens
    assert decisions(second_trace) == ["disk-text"]
    assert evaluated(second_trace) == [second["usage"]["prompt_tokens"] - live_tokens]
    assert second["usage"]["prompt_tokens_details"]["cache_write_tokens"] == (
        second["usage"]["prompt_tokens"] - live_tokens
    )


def test_restart_reports_cache_reads_on_anthropic_and_responses(tmp_path: Path) -> None:
    with server(tmp_path, [REPLIES[0]], io.StringIO()) as live:
        chat(live, conversation("Hello there, who are you?"))
    with server(tmp_path, [REPLIES[1]], io.StringIO()) as live:
        messages = conversation("Hello there, who are you?", REPLIES[0], "Fine.")
        body = {
            "model": "deepseek-v4-flash",
            "system": SYSTEM,
            "messages": messages[1:],
            "max_tokens": 32,
            "thinking": {"type": "disabled"},
        }
        reply = httpx.post(live.url + "/v1/messages", json=body, timeout=60).json()
        assert reply["usage"]["cache_read_input_tokens"] > 0
        assert reply["usage"]["cache_creation_input_tokens"] > 0
    fresh = {"kv_disk_dir": str(tmp_path / "kv2")}
    with server(tmp_path, [REPLIES[2]], io.StringIO(), **fresh) as live:
        body = {"model": "deepseek-v4-flash", "instructions": SYSTEM, "input": "Hello there"}
        first = httpx.post(live.base + "/responses", json=body, timeout=60).json()
    with server(tmp_path, [REPLIES[3]], io.StringIO(), **fresh) as live:
        again = httpx.post(live.base + "/responses", json=body, timeout=60).json()
    assert first["usage"]["input_tokens_details"]["cached_tokens"] == 0
    assert again["usage"]["input_tokens_details"]["cached_tokens"] > 0


@pytest.mark.parametrize(
    ("mem_bytes", "resumed"), [(0, "disk-text"), (1 << 30, "memory-checkpoint")]
)
def test_switching_conversations_resumes_each_from_disk_or_memory(
    tmp_path: Path, mem_bytes: int, resumed: str
) -> None:
    """With the in-memory checkpoints (ADR 0049) the replaced state comes back from
    RAM; without them, from its evict file."""
    trace = io.StringIO()
    a1 = conversation("Tell me about the number forty two.")
    b1 = conversation("Which city is the capital of France?")
    with server(tmp_path, REPLIES, trace, kv_mem_bytes=mem_bytes) as live:
        ra = chat(live, a1)
        rb = chat(live, b1)  # a miss: A's live state is saved (evict) first
        a2 = chat(live, [*a1, {"role": "assistant", "content": REPLIES[0]}, user("More?")])
        b2 = chat(live, [*b1, {"role": "assistant", "content": REPLIES[1]}, user("Why?")])
    assert cached(ra) == 0
    assert 0 < cached(rb) < len(SYSTEM) // 4  # only the shared system prompt is reused
    a_live = ra["usage"]["prompt_tokens"] + ra["usage"]["completion_tokens"]
    b_live = rb["usage"]["prompt_tokens"] + rb["usage"]["completion_tokens"]
    assert cached(a2) == a_live and cached(b2) == b_live
    assert decisions(trace) == ["none", "none", resumed, resumed]
    assert trace.getvalue().count("kv cache stored reason=evict") == 3


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_budget_eviction_keeps_the_directory_under_budget(tmp_path: Path) -> None:
    trace = io.StringIO()
    # each file is ~0.5-0.8 KB: the budget holds about three
    opts = KvCacheOptions(**{**OPTS.__dict__, "budget_bytes": 2200})
    topics = ["apples", "boats", "clouds", "deserts", "eagles", "forests"]
    # no in-memory checkpoints: the resumed conversation must come from the disk
    with server(tmp_path, REPLIES, trace, kv_cache=opts, kv_mem_bytes=0) as live:
        for topic in topics:
            chat(live, conversation(f"Tell me something about {topic}."))
            assert sum(p.stat().st_size for p in kv_files(tmp_path)) <= 2200
        # the conversation saved last (evicted from RAM by "forests") is still on disk
        eagles = conversation("Tell me something about eagles.", REPLIES[4 % len(REPLIES)])
        resumed = chat(live, [*eagles, user("And more?")])
    assert "kv cache evicted reason=disk-cache-full" in trace.getvalue()
    assert cached(resumed) > 0 and decisions(trace)[-1] == "disk-text"


def test_corrupt_and_garbage_files_are_quarantined_and_the_server_answers(
    tmp_path: Path,
) -> None:
    with server(tmp_path, [REPLIES[0]], io.StringIO()) as live:
        first = chat(live, conversation("What is six times seven?"))
    files = kv_files(tmp_path)
    assert files
    for path in files:  # break every payload (its magic), keep the header valid
        raw = bytearray(path.read_bytes())
        text_bytes = int.from_bytes(raw[48:52], "little")
        raw[52 + text_bytes : 52 + text_bytes + 4] = b"JUNK"
        path.write_bytes(bytes(raw))
    (tmp_path / "kv" / ("ab" * 20 + ".kv")).write_bytes(b"KVC\x01garbage")
    (tmp_path / "kv" / "README").write_text("not ours")
    trace = io.StringIO()
    with server(tmp_path, [REPLIES[1]], trace) as live:
        messages = conversation("What is six times seven?", REPLIES[0], "Sure?")
        second = chat(live, messages)
    assert second["choices"][0]["message"]["content"] == REPLIES[1]
    assert cached(second) == 0 and first["usage"]["prompt_tokens"] > 0
    log = trace.getvalue()
    # each fails its checksum once and is moved aside, the garbage file too
    assert log.count("kv cache quarantined") == len(files) + 1
    assert "kv cache discarded" not in log
    for path in files:  # gone, or written afresh under the same key (the cold save)
        assert not path.exists() or b"JUNK" not in path.read_bytes()
    assert not (tmp_path / "kv" / ("ab" * 20 + ".kv")).exists()
    assert len(list((tmp_path / "kv" / "quarantine").iterdir())) == len(files) + 1
    assert (tmp_path / "kv" / "README").exists()
    assert "kv cache stored reason=cold" in log  # the miss was cached afresh


def test_continued_frontiers_while_prefilling_and_decoding(tmp_path: Path) -> None:
    trace = io.StringIO()
    opts = KvCacheOptions(**{**OPTS.__dict__, "continued_interval_tokens": 16})
    long_reply = "one two three four five six seven eight nine ten " * 4
    with server(tmp_path, [long_reply], trace, kv_cache=opts, prefill_chunk=16) as live:
        reply = chat(live, conversation("Count to forty please."), max_tokens=200)
    frontiers = [int(n) for n in re.findall(r"reason=continued tokens=(\d+)", trace.getvalue())]
    prompt = reply["usage"]["prompt_tokens"]
    total = prompt + reply["usage"]["completion_tokens"]
    assert frontiers == sorted(set(frontiers)) and all(n % 16 == 0 for n in frontiers)
    assert any(n <= prompt for n in frontiers)  # while prefilling
    assert any(prompt < n <= total for n in frontiers)  # while decoding
    store = DiskKVStore(tmp_path / "kv")
    reasons = {e.header.tokens: e.header.reason for e in store.entries()}
    assert all(reasons[n] in (SaveReason.CONTINUED, SaveReason.COLD) for n in frontiers)


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a shell command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


def test_tool_ids_after_a_restart_replay_the_sampled_dsml(tmp_path: Path) -> None:
    # an odd spacing the canonical renderer would never reproduce
    sampled = "Listing." + tool_call_dsml("bash", command="ls   -la")
    first_trace, trace = io.StringIO(), io.StringIO()
    messages: list[dict[str, Any]] = [*conversation("List my files please.")]
    with server(tmp_path, [sampled], first_trace) as live:
        first = chat(live, messages, tools=TOOLS)
    call = first["choices"][0]["message"]["tool_calls"][0]
    store = DiskKVStore(tmp_path / "kv")
    assert any(e.header.flags & KvcFlags.KTM_TRAILER for e in store.entries())
    messages += [
        {"role": "assistant", "content": "Listing.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "a.txt b.txt"},
    ]
    with server(tmp_path, ["Two files."], trace) as live:
        second = chat(live, messages, tools=TOOLS)
    assert second["choices"][0]["message"]["content"] == "Two files."
    assert "replay mem=0 disk=1" in trace.getvalue()
    live_tokens = first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"]
    assert cached(second) == live_tokens and decisions(trace) == ["disk-text"]
