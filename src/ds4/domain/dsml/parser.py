"""Generated text to tool calls (docs/reference/chat-and-dsml.md §3.4): locate a DSML
block and walk it, and finish a generated chat turn (reasoning, visible content, tool
calls, finish reason).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from ds4.domain.dsml.syntax import (
    SPELLINGS,
    THINK_CLOSE,
    THINK_OPEN,
    WHITESPACE,
    Spelling,
    ToolCall,
    decode_entities,
    is_json,
    is_partial,
    json_string,
    minify_json,
    unescape_param_text,
)

# --- parser ---
# Generated text to tool calls: locate a DSML block and walk it
# (docs/reference/chat-and-dsml.md §3.4).
#
# The walk reports one of three outcomes so recovery can decide what to do:
# complete (the block closed), truncated (the text ended inside the block) or
# malformed (the block breaks the grammar).

_ATTRIBUTE = re.compile(r'\s+([A-Za-z_][\w-]*)\s*=\s*"([^"]*)"')


class BlockStatus(Enum):
    COMPLETE = "complete"
    TRUNCATED = "truncated"
    MALFORMED = "malformed"


@dataclass(frozen=True)
class BlockStart:
    start: int  # includes a preceding "\n\n" when there is one
    tag_end: int  # just past the tool_calls open tag
    spelling: Spelling


@dataclass(frozen=True)
class BlockParse:
    status: BlockStatus
    calls: tuple[ToolCall, ...]
    end: int = 0  # COMPLETE: just past the block close tag
    # TRUNCATED: where the last whole structural element ends, whether the cut fell
    # inside a parameter value, and the close tags that would finish the block.
    cut: int = 0
    in_value: bool = False
    missing_closers: str = ""
    open_invoke_has_params: bool = True


class _MalformedError(Exception):
    pass


class _TruncatedError(Exception):
    def __init__(self, cut: int, *, in_value: bool, in_invoke: bool, has_params: bool) -> None:
        super().__init__()
        self.cut = cut
        self.in_value = in_value
        self.in_invoke = in_invoke
        self.has_params = has_params


def find_block_start(text: str, search_from: int = 0) -> BlockStart | None:
    """First spelling found wins (full, short, plain); within it the earliest tag."""
    for spelling in SPELLINGS:
        pos = text.find(spelling.block_open, search_from)
        if pos >= 0:
            start = pos - 2 if pos - 2 >= search_from and text[pos - 2 : pos] == "\n\n" else pos
            return BlockStart(start, pos + len(spelling.block_open), spelling)
    return None


def parse_attributes(header: str) -> dict[str, str] | None:
    """`name="x" string="true"` (entity-decoded values); None if it is not attributes."""
    attributes: dict[str, str] = {}
    pos = 0
    for match in _ATTRIBUTE.finditer(header):
        if match.start() != pos:
            return None
        attributes.setdefault(match.group(1), decode_entities(match.group(2)))
        pos = match.end()
    if header[pos:].strip(WHITESPACE + "/"):
        return None
    return attributes


def is_string_value(attributes: dict[str, str]) -> bool:
    """A parameter is a string unless it says string="<anything but true>"."""
    return attributes.get("string", "true") == "true"


def value_json(raw: str, *, is_string: bool, spelling: Spelling) -> str:
    """A parameter body as the JSON text of its argument value
    (docs/reference/chat-and-dsml.md §3.4)."""
    if is_string:
        return json_string(unescape_param_text(raw, spelling.param_close))
    literal = raw.strip(WHITESPACE)
    if not literal:
        return "null"
    if is_json(literal):
        return minify_json(literal)
    return json_string(raw)  # not JSON after all: keep the text rather than lose the call


class _Walker:
    def __init__(self, text: str, spelling: Spelling) -> None:
        self.text = text
        self.s = spelling

    def skip_ws(self, pos: int) -> int:
        while pos < len(self.text) and self.text[pos] in WHITESPACE:
            pos += 1
        return pos

    def at(self, pos: int, tag: str) -> bool:
        return self.text.startswith(tag, pos)

    def partial(self, pos: int, *tags: str) -> bool:
        """The text ends at pos with a proper prefix of one of tags."""
        return is_partial(self.text[pos:], *tags)

    def header(self, pos: int, tag: str) -> tuple[dict[str, str], int] | None:
        """Attributes of the tag at pos and the index after its '>' (None: not yet closed).

        A tool needs a non-empty name; a parameter only a name attribute ("" is a
        valid JSON key)."""
        close = self.text.find(">", pos)
        if close < 0:
            return None
        attributes = parse_attributes(self.text[pos + len(tag) : close])
        if attributes is None or "name" not in attributes:
            raise _MalformedError
        if tag == self.s.invoke_open and not attributes["name"]:
            raise _MalformedError
        return attributes, close + 1

    def walk(self, pos: int) -> tuple[list[ToolCall], int]:
        s = self.s
        calls: list[ToolCall] = []
        while True:
            pos = self.skip_ws(pos)
            if pos == len(self.text) or self.partial(pos, s.block_close, s.invoke_open):
                raise _TruncatedError(pos, in_value=False, in_invoke=False, has_params=True)
            if self.at(pos, s.block_close):
                return calls, pos + len(s.block_close)
            if not self.at(pos, s.invoke_open):
                raise _MalformedError
            head = self.header(pos, s.invoke_open)
            if head is None:
                raise _TruncatedError(pos, in_value=False, in_invoke=False, has_params=True)
            attributes, pos = head
            members, pos, closed_block = self.walk_invoke(pos)
            arguments = "{" + ",".join(f"{json_string(k)}:{v}" for k, v in members) + "}"
            calls.append(ToolCall(attributes["name"], arguments))
            if closed_block:
                return calls, pos

    def walk_invoke(self, pos: int) -> tuple[list[tuple[str, str]], int, bool]:
        s = self.s
        members: list[tuple[str, str]] = []
        while True:
            pos = self.skip_ws(pos)
            if pos == len(self.text) or self.partial(
                pos, s.invoke_close, s.param_open, s.block_close
            ):
                raise _TruncatedError(pos, in_value=False, in_invoke=True, has_params=bool(members))
            if self.at(pos, s.invoke_close):
                return members, pos + len(s.invoke_close), False
            if self.at(pos, s.block_close):  # tolerated: the invoke close was left out
                return members, pos + len(s.block_close), True
            if not self.at(pos, s.param_open):
                raise _MalformedError
            head = self.header(pos, s.param_open)
            if head is None:
                raise _TruncatedError(pos, in_value=False, in_invoke=True, has_params=bool(members))
            attributes, pos = head
            key = attributes["name"]
            if "string" not in attributes and self.at(self.skip_ws(pos), s.param_open):
                value, pos = self.walk_loose_object(pos)
            else:
                close = self.text.find(s.param_close, pos)
                if close < 0:
                    raise _TruncatedError(pos, in_value=True, in_invoke=True, has_params=True)
                raw = self.text[pos:close]
                value = value_json(raw, is_string=is_string_value(attributes), spelling=s)
                pos = close + len(s.param_close)
            members.append((key, value))

    def walk_loose_object(self, pos: int) -> tuple[str, int]:
        """Nested <parameter> tags without a string attribute become one JSON object."""
        s = self.s
        members: list[str] = []
        while True:
            pos = self.skip_ws(pos)
            if not self.at(pos, s.param_open):
                break
            head = self.header(pos, s.param_open)
            close = -1 if head is None else self.text.find(s.param_close, head[1])
            if head is None or close < 0:
                raise _TruncatedError(pos, in_value=True, in_invoke=True, has_params=True)
            attributes, start = head
            raw = self.text[start:close]
            value = value_json(raw, is_string=is_string_value(attributes), spelling=s)
            members.append(f"{json_string(attributes['name'])}:{value}")
            pos = close + len(s.param_close)
        if pos == len(self.text) or self.partial(pos, s.param_close):
            raise _TruncatedError(pos, in_value=True, in_invoke=True, has_params=True)
        if self.at(pos, s.param_close):
            pos += len(s.param_close)
        return "{" + ",".join(members) + "}", pos


def parse_block(text: str, block: BlockStart) -> BlockParse:
    walker = _Walker(text, block.spelling)
    try:
        calls, end = walker.walk(block.tag_end)
    except _MalformedError:
        return BlockParse(BlockStatus.MALFORMED, ())
    except _TruncatedError as cut:
        s = block.spelling
        closers = (s.invoke_close if cut.in_invoke else "") + s.block_close
        return BlockParse(
            BlockStatus.TRUNCATED,
            (),
            cut=cut.cut,
            in_value=cut.in_value,
            missing_closers=closers,
            open_invoke_has_params=cut.has_params,
        )
    return BlockParse(BlockStatus.COMPLETE, tuple(calls), end=end)


# --- turn ---
# Finish a generated chat turn: reasoning, visible content, tool calls, finish reason.
#
# docs/reference/chat-and-dsml.md §3.4, §3.8 with the repairs ADR 0020 adopts (§3.8):
# a truncated block is closed when it was cut between elements; a block that is
# malformed, or cut inside a value, comes back as plain text with finish "stop" (or
# "length" when the budget ran out) so the client can see it and retry.

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
