"""Finish a generated chat turn: reasoning, visible content, tool calls, finish reason.

docs/reference/chat-and-dsml.md §3.4, §3.8 with the repairs ADR 0020 adopts (§3.8):
a truncated block is closed when it was cut between elements; a block that is
malformed, or cut inside a value, comes back as plain text with finish "stop" (or
"length" when the budget ran out) so the client can see it and retry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from ds4.domain.dsml.calls import ToolCall
from ds4.domain.dsml.parser import (
    BlockParse,
    BlockStart,
    BlockStatus,
    find_block_start,
    parse_block,
)
from ds4.domain.dsml.syntax import SPELLINGS, THINK_CLOSE, THINK_OPEN, WHITESPACE

FinishReason = Literal["stop", "length", "tool_calls", "error"]

_LINE_START_BLOCK = re.compile(
    "(?:^|\n)[ \t]*(" + "|".join(re.escape(s.block_open) for s in SPELLINGS) + ")"
)


class Recovery(Enum):
    NONE = "none"
    REPAIRED = "repaired"  # truncated block closed by appending the missing tags
    AS_TEXT = "as_text"  # unusable block returned as plain content


@dataclass(frozen=True)
class TurnResult:
    content: str
    reasoning: str | None
    calls: tuple[ToolCall, ...]
    raw_dsml: str | None  # exact sampled block (from its leading blank line), for replay
    finish: FinishReason
    recovery: Recovery = Recovery.NONE


def split_reasoning(text: str) -> tuple[str | None, str]:
    """(reasoning, content): reasoning ends at the first </think>; a leading <think>
    is dropped; without </think> everything is content and reasoning is None."""
    body = text.removeprefix(THINK_OPEN)
    close = body.find(THINK_CLOSE)
    if close < 0:
        return None, text
    return body[:close], body[close + len(THINK_CLOSE) :]


def _split(text: str, thinking: bool) -> tuple[str | None, str]:
    return split_reasoning(text) if thinking else (None, text)


def _repair(text: str, block: BlockStart, parsed: BlockParse) -> tuple[tuple[ToolCall, ...], str]:
    """Close a block cut between elements; () when it is not complete enough.

    Complete enough: the cut is outside every parameter value (a half-written value
    would become an invented argument) and the open invoke already has a parameter.
    """
    if parsed.status is not BlockStatus.TRUNCATED or parsed.in_value:
        return (), ""
    if not parsed.open_invoke_has_params:
        return (), ""
    repaired = text[: parsed.cut] + parsed.missing_closers
    reparsed = parse_block(repaired, block)
    if reparsed.status is not BlockStatus.COMPLETE or not reparsed.calls:
        return (), ""
    return reparsed.calls, repaired[block.start : reparsed.end]


def _salvage_length(finish: FinishReason) -> FinishReason:
    return finish if finish in ("length", "error") else "stop"


def _unclosed_think(text: str, tools_active: bool, finish: FinishReason) -> TurnResult:
    body = text.removeprefix(THINK_OPEN)
    match = _LINE_START_BLOCK.search(body) if tools_active else None
    if match is not None:
        # A call begun inside reasoning that never closed: hand it to the repair.
        pos = match.start(1)
        block = find_block_start(body, pos)
        assert block is not None
        parsed = parse_block(body, block)
        calls, raw = (parsed.calls, body[block.start : parsed.end])
        if parsed.status is not BlockStatus.COMPLETE:
            calls, raw = _repair(body, block, parsed)
        if calls:
            reasoning = body[: block.start].rstrip()
            return TurnResult("", reasoning, calls, raw, "tool_calls", Recovery.REPAIRED)
    # Truncated reasoning stays reasoning; it never leaks into the answer.
    return TurnResult("", body, (), None, finish)


def finish_turn(
    text: str, *, tools_active: bool, thinking: bool, finish: FinishReason
) -> TurnResult:
    """Split a finished turn's text and parse its tool calls.

    `thinking`: the prompt opened <think>, so calls count only after the first
    </think>, where reasoning ends (a call quoted in reasoning is never executable).
    The reference searches after the last </think>, which loses a call whose
    argument mentions </think>; reasoning happens once per turn, so the first wins.
    Without thinking there is no reasoning: a </think> is text, as it was streamed
    (the reference split there too, so the reply lost what the stream had shown).
    `tools_active`: the request declared tools; otherwise DSML is just text.
    """
    search_from = 0
    if thinking:
        close = text.find(THINK_CLOSE)
        if close < 0:
            return _unclosed_think(text, tools_active, finish)
        search_from = close + len(THINK_CLOSE)
    block = find_block_start(text, search_from) if tools_active else None
    if block is None:
        reasoning, content = _split(text, thinking)
        return TurnResult(content, reasoning, (), None, finish)
    parsed = parse_block(text, block)
    head = text[: block.start].rstrip(WHITESPACE)  # the blank line before a block is syntax
    if parsed.status is BlockStatus.COMPLETE and parsed.calls:
        reasoning, content = _split(head, thinking)
        return TurnResult(
            content, reasoning, parsed.calls, text[block.start : parsed.end], "tool_calls"
        )
    calls, raw = _repair(text, block, parsed)
    if calls:
        reasoning, content = _split(head, thinking)
        return TurnResult(content, reasoning, calls, raw, "tool_calls", Recovery.REPAIRED)
    reasoning, content = _split(text, thinking)
    return TurnResult(content, reasoning, (), None, _salvage_length(finish), Recovery.AS_TEXT)
