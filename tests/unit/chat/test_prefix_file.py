"""--prefix-file parsing: turns, the newline rule, and every refusal naming the file
and line; rendering as closed history turns."""

from __future__ import annotations

import pytest

from ds4.domain.chat import (
    BOS,
    AssistantMessage,
    ThinkMode,
    UserMessage,
    parse_prefix_file,
    render_chat,
    render_closed_turns,
    with_prefix,
)
from ds4.domain.errors import Ds4Error


def test_turns_content_and_the_trailing_newline_rule() -> None:
    data = (
        b"\xef\xbb\xbfUSER: You are a calculator.\nASSISTANT:\t6*7 = 42\r\n"
        b"USER:two\nlines\n\nASSISTANT: done\n"
    )
    assert parse_prefix_file(data, "p.txt") == (
        UserMessage("You are a calculator."),
        AssistantMessage("6*7 = 42"),
        UserMessage("two\nlines\n"),  # one newline removed, the blank line kept
        AssistantMessage("done"),
    )
    # no newline at the end of the file; only the first space after the marker goes
    assert parse_prefix_file(b"USER:  x\nASSISTANT: y", "p") == (
        UserMessage(" x"),
        AssistantMessage("y"),
    )


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "the prefix file is empty"),
        (b"\xef\xbb\xbf", "the prefix file is empty"),
        (b"USER: a\0\nASSISTANT: b", "NUL byte at offset 7"),
        (b"hello\nUSER: a\nASSISTANT: b", "line 1 must start with USER: or ASSISTANT:"),
        (b"ASSISTANT: a\nUSER: b", "line 1: expected USER:"),
        (b"USER: a\nUSER: b\nASSISTANT: c", "line 2: expected ASSISTANT:"),
        (b"USER: a\nASSISTANT: b\nUSER: c", "prefix file must end with an ASSISTANT turn"),
        (b"USER:\nASSISTANT: b", "line 1 has an empty USER turn"),
        (b"USER: a\nASSISTANT: \n", "line 2 has an empty ASSISTANT turn"),
        (b"User: a\nASSISTANT: b", "line 1 must start with USER: or ASSISTANT:"),
        (b"USER: \xff\nASSISTANT: b", "not UTF-8 (byte 6)"),
    ],
)
def test_refusals_name_the_file_and_the_line(data: bytes, problem: str) -> None:
    with pytest.raises(Ds4Error) as caught:
        parse_prefix_file(data, "dir/prefix.txt")
    assert str(caught.value) == f"dir/prefix.txt: {problem}"


def test_prefix_turns_render_as_closed_history_before_the_conversation() -> None:
    prefix = parse_prefix_file(b"USER: 6*7?\nASSISTANT: 42\n", "p")
    history = render_closed_turns(prefix, ThinkMode.HIGH)
    assert history == "<｜User｜>6*7?<｜Assistant｜></think>42<｜end▁of▁sentence｜>"
    live = (UserMessage("9*13?"),)
    text = render_chat(with_prefix(live, prefix), (), ThinkMode.HIGH)
    assert text == BOS + history + "<｜User｜>9*13?<｜Assistant｜><think>"
    assert with_prefix((), prefix) == ()  # nothing to prefix (a raw completion)
