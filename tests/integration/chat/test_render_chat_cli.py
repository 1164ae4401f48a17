"""`ds4 cli --render-chat`: what the model would see, as text or token ids."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BODY = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "reasoning_effort": "high",
}


def ds4(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ds4", *args], capture_output=True, text=True)


@pytest.fixture
def request_file(tmp_path: Path) -> Path:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(BODY), encoding="utf-8")
    return path


def test_render_chat_modes(request_file: Path) -> None:
    think = ds4("cli", "--render-chat", str(request_file))
    assert think.returncode == 0, think.stderr
    assert think.stdout == (
        "<｜begin▁of▁sentence｜>Be brief.<｜User｜>What is 2+2?<｜Assistant｜><think>"
    )
    nothink = ds4("cli", "--render-chat", str(request_file), "--nothink")
    assert nothink.stdout.endswith("<｜Assistant｜></think>")
    # Think Max needs a large context; below it the CLI renders normal thinking.
    small = ds4("cli", "--render-chat", str(request_file), "--think-max")
    large = ds4("cli", "--render-chat", str(request_file), "--think-max", "--ctx", "400000")
    assert small.stdout == think.stdout
    assert large.stdout != think.stdout and large.stdout.endswith("<think>")


def test_render_chat_tokens(request_file: Path) -> None:
    result = ds4("cli", "--render-chat", str(request_file), "--dump-tokens", "--json")
    assert result.returncode == 0, result.stderr
    ids = [row["id"] for row in json.loads(result.stdout)]
    assert ids[0] == 0  # BOS
    assert ids[-2:] == [128804, 128821]  # <｜Assistant｜><think>


def test_bad_request_bodies_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    for text in ('{"messages": 5}', "{not json", '{"messages": [{"role": 5}]}'):
        bad.write_text(text, encoding="utf-8")
        result = ds4("cli", "--render-chat", str(bad))
        assert result.returncode == 2, text
        assert result.stderr.startswith("ds4: error: ") and result.stderr.count("\n") == 1
    missing = ds4("cli", "--render-chat", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "no such file or directory" in missing.stderr


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        (
            [{"role": "user", "content": "hi"}, {"role": "narrator", "content": "x"}],
            "messages[1].role: unknown role 'narrator' (expected system, developer, user, "
            "assistant, tool, function)",
        ),
        ([], "messages: empty: a conversation needs at least one user message"),
        (
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            "messages: nothing to answer after the final assistant turn; the last message "
            "must be a user message or a tool result (assistant prefill is not supported)",
        ),
    ],
)
def test_unrenderable_conversations_are_one_line_errors(
    tmp_path: Path, messages: list[dict[str, str]], error: str
) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps({"messages": messages}), encoding="utf-8")
    result = ds4("cli", "--render-chat", str(path))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"ds4: error: {error}\n"
