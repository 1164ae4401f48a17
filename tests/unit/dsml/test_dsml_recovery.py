"""Held-out truncated / malformed / nested DSML outputs (repair or text:
docs/reference/chat-and-dsml.md §3.8, ADR 0020)."""

from __future__ import annotations

import pytest

from ds4.domain.dsml.parser import Recovery, finish_turn
from ds4.domain.dsml.syntax import ToolCall, render_tool_calls

D = "｜DSML｜"
TWO_CALLS = render_tool_calls(
    [ToolCall("read", '{"path":"a.txt"}'), ToolCall("bash", '{"command":"ls","timeout":5}')]
)


def _block(inner: str) -> str:
    return f"<{D}tool_calls>{inner}</{D}tool_calls>"


def _cut_after(marker: str, occurrence: int = 1) -> str:
    pos = -1
    for _ in range(occurrence):
        pos = TWO_CALLS.index(marker, pos + 1)
    return TWO_CALLS[: pos + len(marker)]


@pytest.mark.parametrize(
    ("cut", "expected"),
    [
        # Cut after the last invoke closed: only the block close is missing.
        (_cut_after(f"</{D}invoke>\n", 2), 2),
        # Cut between parameters of the second invoke: invoke + block are closed.
        (_cut_after(f"</{D}parameter>\n", 2), 2),
        # Cut inside a close tag: the partial tag is dropped, then closed.
        (_cut_after(f"</{D}parameter>\n", 3) + f"</{D}inv", 2),
        # First invoke complete, second header half written: the second is dropped.
        (_cut_after(f"</{D}invoke>\n") + f'<{D}invoke name="ba', 1),
    ],
)
def test_truncated_block_cut_between_elements_is_repaired(cut: str, expected: int) -> None:
    result = finish_turn("x" + cut, tools_active=True, thinking=False, finish="length")
    assert result.recovery is Recovery.REPAIRED
    assert result.finish == "tool_calls"
    assert len(result.calls) == expected
    assert result.calls[0] == ToolCall("read", '{"path":"a.txt"}')
    assert result.raw_dsml is not None and result.raw_dsml.endswith(f"</{D}tool_calls>")


@pytest.mark.parametrize(
    "cut",
    [
        _cut_after('string="true">a.t'),  # inside a string value
        _cut_after('string="false">'),  # value not started
        _cut_after(f'<{D}invoke name="read">\n'),  # invoke with no parameter yet
        _cut_after(f"<{D}tool_calls>\n"),  # nothing but the block open tag
    ],
)
def test_truncated_block_not_complete_enough_is_returned_as_text(cut: str) -> None:
    result = finish_turn("x" + cut, tools_active=True, thinking=False, finish="length")
    assert (result.calls, result.finish, result.recovery) == ((), "length", Recovery.AS_TEXT)
    assert result.content == "x" + cut


def test_unterminated_block_ended_by_eos_is_text_with_finish_stop() -> None:
    cut = _cut_after('string="true">a.t')
    result = finish_turn(cut, tools_active=True, thinking=False, finish="stop")
    assert (result.finish, result.content) == ("stop", cut)


def test_missing_invoke_close_before_block_close_is_tolerated() -> None:
    text = TWO_CALLS.replace(f"</{D}invoke>\n</{D}tool_calls>", f"</{D}tool_calls>")
    result = finish_turn(text, tools_active=True, thinking=False, finish="stop")
    assert len(result.calls) == 2


@pytest.mark.parametrize(
    "text",
    [
        _block(f'<{D}invoke name="f"><{D}parameter string="true">v</{D}parameter></{D}invoke>'),
        _block(f'<{D}invoke name="f" junk><{D}parameter name="a">v</{D}parameter></{D}invoke>'),
        f"<{D}tool_calls></{D}tool_calls>",
        f'<{D}tool_calls><{D}invoke name="f">stray text</{D}invoke></{D}tool_calls>',
    ],
)
def test_malformed_blocks_come_back_as_text(text: str) -> None:
    result = finish_turn(text, tools_active=True, thinking=False, finish="tool_calls")
    assert (result.calls, result.content, result.finish) == ((), text, "stop")


def test_call_begun_inside_unclosed_think_is_recovered_at_the_end() -> None:
    text = "let me look\n" + _cut_after(f"</{D}invoke>\n", 2)
    result = finish_turn(text, tools_active=True, thinking=True, finish="length")
    assert result.reasoning == "let me look"
    assert len(result.calls) == 2
    assert result.recovery is Recovery.REPAIRED


def test_quoted_block_tag_inside_unclosed_think_stays_reasoning() -> None:
    text = f'the "<{D}tool_calls>" block is how tools are called'
    result = finish_turn(text, tools_active=True, thinking=True, finish="length")
    assert (result.reasoning, result.calls, result.content) == (text, (), "")
