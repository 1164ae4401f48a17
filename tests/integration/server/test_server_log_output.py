"""What `ds4 server` writes on stderr (issue 16 item 3): one access line per request
and no line twice, in text and in JSON; uvicorn's access log never appears."""

from __future__ import annotations

import json
import signal
import socket
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from tests.integration.server.server_process import scripted_args, server_process

CHAT = "/v1/chat/completions"
ACCESS_FIELDS = {
    "method", "path", "api", "status", "prompt_tokens", "cached_tokens",
    "generated_tokens", "ttft_s", "tokens_per_s", "finish", "cache_source", "duration_s",
    "client",
}  # fmt: skip


def chat(text: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text}]}


def run_server(tmp_path: Path, *extra: str) -> str:
    """A scripted server with a disk KV cache answers A, B, A again (a disk hit), a bad
    body and a garbage request line; then everything it wrote on stderr."""
    kv = tmp_path / "kv"
    outputs = ["</think>one", "</think>two", "</think>three"]
    args = [*scripted_args(tmp_path, outputs), "--kv-disk-dir", str(kv)]
    with server_process([*args, "--kv-cache-min-tokens", "4", *extra]) as server:
        for text in ("first conversation", "another one", "first conversation"):
            assert httpx.post(server.url + CHAT, json=chat(text), timeout=30).status_code == 200
        assert httpx.post(server.url + CHAT, content=b"{bad", timeout=30).status_code == 400
        address = urlsplit(server.url)
        with socket.create_connection((address.hostname, address.port)) as raw:
            raw.sendall(b"GARBAGE\r\n\r\n")
            assert raw.recv(100).startswith(b"HTTP/1.1 400")
        status, stderr = server.stop()
    assert status in (0, -signal.SIGTERM), stderr  # uvicorn re-raises the signal it caught
    assert "Traceback" not in stderr
    return stderr


def repeated(lines: list[str]) -> list[str]:
    """Lines written more than once; /health access lines aside (the start-up probe's
    lines can coincide to the port and the 0.1 ms)."""
    counts = Counter(line for line in lines if line.strip() and "/health" not in line)
    return [line for line, n in counts.items() if n > 1]


def test_text_lines_one_per_request_and_none_twice(tmp_path: Path) -> None:
    lines = run_server(tmp_path).splitlines()
    access = [line for line in lines if line.startswith("ds4 server: access ")]
    chats = [line for line in access if f"path={CHAT} " in line]
    assert [line.split("status=")[1].split()[0] for line in chats] == ["200", "200", "200", "400"]
    assert "cache_source=disk-text" in chats[2]
    assert any(line.startswith("ds4 server: kv cache stored reason=cold") for line in lines)
    assert any(line.startswith("ds4 server: kv cache hit") for line in lines)
    assert "ds4 server: Invalid HTTP request received." in lines  # uvicorn's, through ours
    assert not [line for line in lines if "HTTP/1.1" in line]  # uvicorn's access log is off
    assert repeated(lines) == []


def test_json_lines_parse_with_stable_fields_and_none_twice(tmp_path: Path) -> None:
    lines = run_server(tmp_path, "--log-format", "json").splitlines()
    # the start-up banner is text; from the first log line on, every line is JSON
    first = next(i for i, line in enumerate(lines) if line.startswith("{"))
    entries = [json.loads(line) for line in lines[first:] if line.strip()]
    access = [e for e in entries if e["logger"] == "ds4.access"]
    assert all(set(e) == {"time", "level", "logger", "message", *ACCESS_FIELDS} for e in access)
    chats = [e for e in access if e["path"] == CHAT]
    assert [e["status"] for e in chats] == [200, 200, 200, 400]
    assert [e["cache_source"] for e in chats] == ["none", "none", "disk-text", None]
    assert chats[0]["generated_tokens"] > 0 and chats[3]["generated_tokens"] is None
    kv = [e["message"] for e in entries if e["logger"] == "ds4.kvcache"]
    assert any(m.startswith("kv cache hit") for m in kv)
    assert {"logger": "uvicorn.error", "level": "warning"}.items() <= next(
        e for e in entries if e["message"] == "Invalid HTTP request received."
    ).items()
    assert repeated(lines) == []


def test_a_reply_the_context_cuts_short_is_one_warning(tmp_path: Path) -> None:
    """Without max_tokens a reply runs until the model stops or the context is full; the
    client sees finish `length` either way, the operator reads which it was."""
    long = "</think>" + "word " * 200
    args = [*scripted_args(tmp_path, [long, long]), "--ctx", "64"]
    with server_process(args) as server:
        cut = httpx.post(server.url + CHAT, json=chat("hi"), timeout=30).json()
        body = {**chat("hi"), "max_tokens": 5}
        bounded = httpx.post(server.url + CHAT, json=body, timeout=30).json()
        _, stderr = server.stop()
    assert cut["choices"][0]["finish_reason"] == "length"
    assert bounded["choices"][0]["finish_reason"] == "length"
    warnings = [line for line in stderr.splitlines() if "context limit" in line]
    assert len(warnings) == 1 and "of ctx 64" in warnings[0], stderr
