"""/history over a rendered transcript, and slash command parsing."""

from __future__ import annotations

import re

from ds4.domain.agent.slash import (
    SlashCommand,
    history_text,
    parse_slash,
    split_turns,
    usage_error,
    when_busy,
)
from ds4.domain.chat import ASSISTANT, EOS, USER

_SGR = re.compile(r"\x1b\[[0-9;]*m")

CONVERSATION = (
    f"{USER}first question{ASSISTANT}<think>hmm</think>first answer{EOS}"
    f"{USER}second{ASSISTANT}<think>x</think>\n\n<｜DSML｜tool_calls>\n"
    '<｜DSML｜invoke name="bash">\n<｜DSML｜parameter name="command" string="true">ls'
    f"</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>{EOS}"
    f"{USER}<tool_result>Tool result 1 (bash):\nfile&lt;/tool_result>\n</tool_result>"
    f"{ASSISTANT}<think></think>listed{EOS}"
)


def test_turns_are_split_and_tool_results_unwrapped() -> None:
    kinds = [k for k, _ in split_turns(CONVERSATION)]
    assert kinds == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert split_turns(CONVERSATION)[4][1] == "Tool result 1 (bash):\nfile</tool_result>\n"


def test_history_shows_the_last_user_turns_and_replays_calls() -> None:
    text = _SGR.sub("", history_text(CONVERSATION, 1))
    assert text.startswith("--- session history: last 1 user turn(s) ---\nUser: second\n")
    assert "🛠️ $ ls\n" in text
    assert "first question" not in text
    assert text.endswith("listed\n--- end history ---\n")
    both = _SGR.sub("", history_text(CONVERSATION, 5))
    assert "last 2 user turn(s)" in both and "User: first question" in both
    assert history_text("", 3) == "(no user history)\n"


def test_slash_commands() -> None:
    assert parse_slash("/switch abc") == SlashCommand("switch", "abc")
    assert parse_slash("/nope") is None
    assert parse_slash("hello") is None
    assert usage_error(SlashCommand("switch", "")) == "usage: /switch ID"
    assert usage_error(SlashCommand("save", "x")) == "usage: /save"
    assert usage_error(SlashCommand("history", "0")) is not None
    assert usage_error(SlashCommand("history", "12")) is None
    assert when_busy(SlashCommand("save", "")) == "later"
    assert when_busy(SlashCommand("list", "")) == "refuse"
    assert when_busy(SlashCommand("help", "")) == "now"
