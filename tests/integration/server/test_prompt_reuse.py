"""Prompt reuse that never prefills again what was prefilled (issue 16, ADR 0049): a
Claude-Code-shaped sequence through a live server, over the real tokenizer.

The first request is Claude Code's own (tests/integration/server/agent_requests: its
headers, beta path, system blocks, tools, adaptive thinking); its reply is longer than
the live state's rewind history (1024 positions, which the scripted backend keeps as the
real ones do). Then the conversation continues, then the first request comes again (a
retry). Each later request reports at least the first prompt as cached, live and after
a restart with --kv-disk-dir.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.integration.server.live_server import LiveServer, live_server

from ds4.domain.kvcache.policy import KvCacheOptions

CAPTURE = Path(__file__).parent / "agent_requests" / "claude_code.json"
LONG_ANSWER = "Here is what the files hold, one by one, in order. " * 120  # ~1400 tokens
SCRIPT = ["Reading.</think>" + LONG_ANSWER, "Nothing more.</think>That is all.", "</think>"]
# the disk cache as a user sets it up, with small frontiers so the test stays short
OPTS = KvCacheOptions(budget_bytes=0, min_tokens=64, boundary_align_tokens=64)


def first_request() -> dict[str, Any]:
    capture: dict[str, Any] = json.loads(CAPTURE.read_text(encoding="utf-8"))[0]
    return capture


def continued(first: dict[str, Any]) -> dict[str, Any]:
    body = dict(first["body"])
    body["messages"] = [
        *body["messages"],
        {"role": "assistant", "content": [{"type": "text", "text": LONG_ANSWER}]},
        {"role": "user", "content": [{"type": "text", "text": "Anything else?"}]},
    ]
    return {**first, "body": body}


def usage(server: LiveServer, request: dict[str, Any]) -> tuple[int, int]:
    """(prompt tokens, cached tokens) of one streamed request, from message_start."""
    body = {**request["body"], "stream": True}
    with httpx.stream(
        "POST",
        server.url + request["path"],
        headers=request["headers"],
        content=json.dumps(body).encode(),
        timeout=120,
    ) as response:
        assert response.status_code == 200, response.read()
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    start = json.loads(lines[0][6:])["message"]["usage"]
    read, write = start["cache_read_input_tokens"], start["cache_creation_input_tokens"]
    return read + write, read


def sources(trace: io.StringIO) -> list[str]:
    return re.findall(r"cache decision --- .*source=(\S+)", trace.getvalue())


def test_claude_code_sequence_keeps_the_prompt_live_and_after_a_restart(tmp_path: Path) -> None:
    first = first_request()
    options: dict[str, Any] = {"ctx": 8192, "kv_disk_dir": str(tmp_path / "kv"), "kv_cache": OPTS}
    trace = io.StringIO()
    with live_server(tmp_path, SCRIPT, trace, **options) as live:
        prompt, cached = usage(live, first)
        assert cached == 0
        assert prompt > 1000  # the capture's prompt (12K tokens in the trace)
        session = live.built.workers[0].session
        assert session.pos - prompt > 1024  # the reply outgrew the rewind history
        assert session.reusable(session.tokens[:prompt]) < prompt - 1  # out of reach

        # The client sends the answer back without its reasoning: the prompt parts from
        # the live state right after the first prompt, which the live state cannot
        # rewind to any more; the copy kept at that prompt's end can.
        _, cached = usage(live, continued(first))
        assert cached >= prompt
        _, cached = usage(live, first)  # the retry
        assert cached >= prompt
    assert sources(trace) == ["none", "memory-checkpoint", "memory-checkpoint"]

    trace = io.StringIO()
    with live_server(tmp_path, SCRIPT, trace, **options) as live:
        _, cached = usage(live, continued(first))
        assert cached >= prompt
        _, cached = usage(live, first)
        assert cached >= prompt
    assert sources(trace) == ["disk-text", "disk-text"]


@pytest.fixture(scope="module")
def random_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random tiny model: it never stops by itself, so a reply runs to max_tokens."""
    out = tmp_path_factory.mktemp("reuse") / "tiny.gguf"
    made = subprocess.run(
        [sys.executable, "-m", "ds4", "gguf", "tiny", "--quant", "q2", "--preset",
         "tiny-2layer", "--out", str(out), "--quiet"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    return out


def chat(live: LiveServer, messages: list[dict[str, str]], max_tokens: int) -> dict[str, Any]:
    body = {"messages": messages, "max_tokens": max_tokens, "think": False, "temperature": 0}
    response = httpx.post(live.base + "/chat/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()
    return reply


@pytest.mark.slow
def test_the_same_sequence_on_the_cpu_backend(tmp_path: Path, random_model: Path) -> None:
    """The real engine's bounded history and real checkpoints. The native state trims
    its history lazily (it may keep up to about twice the 1024 positions), so the reply
    is the issue's 2K+ tokens."""
    system = {"role": "system", "content": "You answer questions about files. " * 150}
    first = [system, {"role": "user", "content": "List the files."}]
    options: dict[str, Any] = {
        "backend": "cpu", "model": str(random_model), "threads": 2, "ctx": 4096,
        "kv_disk_dir": str(tmp_path / "kv"), "kv_cache": OPTS,
    }  # fmt: skip
    with live_server(tmp_path, ["unused"], **options) as live:
        reply = chat(live, first, 2200)
        prompt = reply["usage"]["prompt_tokens"]
        assert reply["usage"]["completion_tokens"] == 2200  # a random model never stops
        session = live.built.workers[0].session
        assert session.rewind_floor(prompt) < prompt  # the prompt's end is out of reach
        answer = reply["choices"][0]["message"]["content"]
        more = [*first, {"role": "assistant", "content": answer}]
        more.append({"role": "user", "content": "More?"})
        assert cached_tokens(chat(live, more, 8)) >= prompt
        assert cached_tokens(chat(live, first, 8)) >= prompt  # the retry
    with live_server(tmp_path, ["unused"], **options) as live:
        assert cached_tokens(chat(live, more, 8)) >= prompt
        assert cached_tokens(chat(live, first, 8)) >= prompt


def cached_tokens(reply: dict[str, Any]) -> int:
    return int(reply["usage"]["prompt_tokens_details"]["cached_tokens"])
