"""--prefix-file in `ds4 cli` and `ds4 server`: the turns come before the conversation
in the prompt the model sees; a bad file is one clear error naming file and line."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import httpx
from tests.integration.server.live_server import live_server

from ds4.apps.cli_generate import prompt_tokens
from ds4.apps.wiring import tokenizer
from ds4.domain.chat import (
    SystemMessage,
    ThinkMode,
    UserMessage,
    parse_prefix_file,
    render_chat,
    with_prefix,
)

PREFIX = b"USER: You are a calculator.\nASSISTANT: 6*7 = 42\n"


def test_the_cli_prompt_renders_the_prefix_turns_first(tmp_path: Path) -> None:
    path = tmp_path / "prefix.txt"
    path.write_bytes(PREFIX)
    args = argparse.Namespace(prompt_tokens=None, system="sys", think_mode="none", ctx=4096,
                              prefix_file=str(path))  # fmt: skip
    tok = tokenizer(None)
    turns = parse_prefix_file(PREFIX, str(path))
    messages = with_prefix((SystemMessage("sys"), UserMessage("9*13")), turns)
    assert prompt_tokens(args, tok, "9*13") == tok.encode(render_chat(messages, (), ThinkMode.NONE))


def test_a_bad_prefix_file_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "prefix.txt"
    path.write_bytes(b"USER: a\nUSER: b\n")
    root = Path(__file__).resolve().parents[3]
    result = subprocess.run(
        [sys.executable, "-m", "ds4", "cli", "-m", str(root / "models" / "demo.gguf"),
         "--prefix-file", str(path), "-p", "hi", "-n", "2"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{path}: line 2: expected ASSISTANT:" in result.stderr


def test_the_server_puts_the_prefix_before_every_chat_conversation(tmp_path: Path) -> None:
    path = tmp_path / "prefix.txt"
    path.write_bytes(PREFIX)
    trace_path = tmp_path / "trace.txt"
    with (
        trace_path.open("w", encoding="utf-8") as trace,
        live_server(tmp_path, ["</think>ok"], trace, prefix_file=str(path)) as server,
    ):
        body = {"model": "deepseek-chat", "messages": [{"role": "user", "content": "9*13"}]}
        reply = httpx.post(server.base + "/chat/completions", json=body, timeout=60)
        assert reply.status_code == 200, reply.text
    text = trace_path.read_text(encoding="utf-8")
    assert "<｜User｜>You are a calculator.<｜Assistant｜></think>6*7 = 42" in text
    assert "<｜end▁of▁sentence｜><｜User｜>9*13<｜Assistant｜>" in text
