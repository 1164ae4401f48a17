"""DSML followed as it is generated (docs/reference/chat-and-dsml.md §3.6, §3.8, ADR 0020):
one tool block lexed token by token, and a tool call begun inside reasoning spotted (the
forced-`</think>` trigger).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from ds4.domain.dsml.parser import is_string_value, parse_attributes
from ds4.domain.dsml.syntax import SPELLINGS, WHITESPACE, Spelling, partial_tag_at

# --- block lexer ---
# One DSML tool block, lexed as it is generated (docs/reference/chat-and-dsml.md §3.6, ADR 0020).
#
# Fed the text after the block's open tag in pieces of any size, it reports
# - `structure`: whether the next token is protocol structure (sampled greedily) or a
#   payload (sampled normally);
# - `closed`: the block close tag came between elements, so generation can stop;
# - the elements it read, in order (tags, headers, whole parameter values), cut where
#   dsml.parser cuts them, for the live tool-call stream.
# It is forgiving where the parser is strict: text that is no tag is skipped to the next
# '<' and a stray parameter close tag is consumed, so sampling stays steered; the parser
# (and the call stream) decide what such a block means. Held lookahead is at most one
# tag; a header or value is kept only until it ends.


class Structure(Enum):
    OUTSIDE = "outside"  # no tool block open (or it closed)
    STRUCTURAL = "structural"  # tags, headers, whitespace between them, a partial close tag
    STRING_BODY = "string_body"
    JSON_STRUCTURAL = "json_structural"  # a string="false" value, outside JSON strings
    JSON_STRING = "json_string"

    @property
    def greedy(self) -> bool:
        return self in (Structure.STRUCTURAL, Structure.JSON_STRUCTURAL)


class Tag(Enum):
    BLOCK_CLOSE = "block_close"
    INVOKE_CLOSE = "invoke_close"
    PARAM_CLOSE = "param_close"  # a stray one, between elements
    INVOKE_OPEN = "invoke_open"
    PARAM_OPEN = "param_open"
    JUNK = "junk"  # text between elements that is no tag
    VALUE = "value"  # a parameter's raw value, read up to (and with) its close tag


@dataclass(frozen=True, slots=True)
class Element:
    """A tag; an open tag's attributes (None: not attributes); a value's raw text."""

    tag: Tag
    attributes: dict[str, str] | None = None
    value: str | None = None


class _At(Enum):
    BETWEEN = "between"
    HEADER = "header"
    PROBE = "probe"  # after a header without `string`: a loose nested object?
    VALUE = "value"
    JUNK = "junk"
    DONE = "done"


_QUOTE_OR_ESCAPE = re.compile(r'["\\]')
_NOT_SPACE = re.compile(f"[^{WHITESPACE}]")


def _skip_space(text: str, pos: int) -> int:
    found = _NOT_SPACE.search(text, pos)
    return len(text) if found is None else found.start()


def _waits_for(text: str, pos: int, tag: str) -> bool:
    """text[pos:] is a proper prefix of tag: the rest of the tag may still come."""
    return len(text) - pos < len(tag) and tag.startswith(text[pos:])


class BlockLexer:
    def __init__(self, spelling: Spelling) -> None:
        s = self._s = spelling
        self._between_tags = (
            (s.block_close, Tag.BLOCK_CLOSE),
            (s.invoke_close, Tag.INVOKE_CLOSE),
            (s.param_close, Tag.PARAM_CLOSE),
            (s.invoke_open, Tag.INVOKE_OPEN),
            (s.param_open, Tag.PARAM_OPEN),
        )
        self._at = _At.BETWEEN
        self._held = ""  # undecided lookahead: a partial tag
        self._parts: list[str] = []  # the header or value read so far
        self._header_tag = Tag.INVOKE_OPEN
        self._json = False  # the value is string="false": track JSON strings for sampling
        self._in_string = self._escaped = False
        self._loose = False  # inside a loose object: its leaves never nest further
        self.structure = Structure.STRUCTURAL

    @property
    def closed(self) -> bool:
        return self._at is _At.DONE

    def feed(self, text: str) -> list[Element]:
        """Read text; each step consumes from `pos` on and says where it stopped."""
        out: list[Element] = []
        text, self._held = self._held + text, ""
        pos = 0
        while pos < len(text) and self._at is not _At.DONE:
            pos = self._step(text, pos, out)
        self._report()
        return out

    def _step(self, text: str, pos: int, out: list[Element]) -> int:
        if self._at is _At.BETWEEN:
            return self._between(text, pos, out)
        if self._at is _At.HEADER:
            return self._header(text, pos, out)
        if self._at is _At.PROBE:
            return self._probe(text, pos)
        if self._at is _At.VALUE:
            return self._value(text, pos, out)
        lt = text.find("<", pos)  # junk: skip to the next '<'
        if lt < 0:
            return len(text)
        self._at = _At.BETWEEN
        return lt

    def _hold(self, text: str, pos: int) -> int:
        self._held = text[pos:]
        return len(text)

    def _between(self, text: str, pos: int, out: list[Element]) -> int:
        pos = _skip_space(text, pos)
        if pos == len(text):
            return pos
        for tag, kind in self._between_tags:
            if text.startswith(tag, pos):
                self._loose = self._loose and kind is Tag.PARAM_OPEN  # a leaf, or its end
                if kind in (Tag.INVOKE_OPEN, Tag.PARAM_OPEN):
                    self._at, self._header_tag = _At.HEADER, kind
                else:
                    out.append(Element(kind))
                    self._at = _At.DONE if kind is Tag.BLOCK_CLOSE else _At.BETWEEN
                return pos + len(tag)
            if _waits_for(text, pos, tag):
                return self._hold(text, pos)
        self._loose = False
        out.append(Element(Tag.JUNK))
        self._at = _At.JUNK
        return pos + 1  # then skip to the next '<' after this character

    def _header(self, text: str, pos: int, out: list[Element]) -> int:
        gt = text.find(">", pos)
        if gt < 0:
            self._parts.append(text[pos:])
            return len(text)
        self._parts.append(text[pos:gt])
        attributes = parse_attributes("".join(self._parts))
        self._parts = []
        out.append(Element(self._header_tag, attributes))
        if self._header_tag is Tag.INVOKE_OPEN:
            self._at = _At.BETWEEN
        elif attributes is not None and "string" not in attributes and not self._loose:
            self._at = _At.PROBE
        else:
            self._open_value(attributes)
        return gt + 1

    def _open_value(self, attributes: dict[str, str] | None) -> None:
        self._at = _At.VALUE
        self._json = attributes is not None and not is_string_value(attributes)
        self._in_string = self._escaped = False

    def _probe(self, text: str, pos: int) -> int:
        """As the parser: a header without `string` whose body (after whitespace) starts
        with a parameter open tag begins a loose object; otherwise it is a string."""
        start, pos = pos, _skip_space(text, pos)
        self._parts.append(text[start:pos])
        tag = self._s.param_open
        if _waits_for(text, pos, tag):
            return self._hold(text, pos)
        if text.startswith(tag, pos):
            self._loose, self._at, self._parts = True, _At.BETWEEN, []
            return pos
        self._open_value(None)  # the whitespace read so far starts the value
        return pos

    def _value(self, text: str, pos: int, out: list[Element]) -> int:
        close = self._s.param_close
        end = text.find(close, pos)
        if end >= 0:
            self._parts.append(text[pos:end])
            out.append(Element(Tag.VALUE, value="".join(self._parts)))
            self._parts = []
            self._at = _At.BETWEEN
            return end + len(close)
        hold = partial_tag_at(text, (close,), pos)
        self._parts.append(text[pos:hold])
        if self._json:
            self._track_json(text, pos, hold)
        return self._hold(text, hold)

    def _track_json(self, text: str, pos: int, end: int) -> None:
        in_string, escaped = self._in_string, self._escaped
        while pos < end:
            if escaped:
                escaped, pos = False, pos + 1
            elif in_string:
                found = _QUOTE_OR_ESCAPE.search(text, pos, end)
                if found is None:
                    break
                pos = found.end()
                if found.group() == "\\":
                    escaped = True
                else:
                    in_string = False
            else:
                quote = text.find('"', pos, end)
                if quote < 0:
                    break
                in_string, pos = True, quote + 1
        self._in_string, self._escaped = in_string, escaped

    def _report(self) -> None:
        if self._at is _At.DONE:
            self.structure = Structure.OUTSIDE
        elif self._at is _At.PROBE:
            self.structure = Structure.STRING_BODY
        elif self._at is not _At.VALUE:
            self.structure = Structure.STRUCTURAL
        elif len(self._held) >= 2:  # "</": the close tag is likely coming
            in_json_string = self._json and self._in_string
            self.structure = Structure.JSON_STRING if in_json_string else Structure.STRUCTURAL
        elif self._json:
            self.structure = Structure.JSON_STRING if self._in_string else Structure.JSON_STRUCTURAL
        else:
            self.structure = Structure.STRING_BODY


# --- think call ---
# Spot a tool call begun inside reasoning: the forced-`</think>` trigger
# (docs/reference/chat-and-dsml.md §3.8, ADR 0020).
#
# The trigger is a block open tag at the start of a line (only spaces or tabs before it,
# or the start of the reasoning), then whitespace and a whole invoke header with a
# non-empty name. A quoted mention (`"<｜DSML｜tool_calls>"`) never fires. Fed the
# reasoning text in pieces of any size, the verdict is the same as on the whole text:
# each character is looked at a bounded number of times.

# An invoke header longer than this (from its '<') without '>' is not a call.
MAX_HEADER = 1024
_BLOCK_OPENS = tuple(s.block_open for s in SPELLINGS)


class ThinkCall(Enum):
    NONE = "none"
    STARTED = "started"  # a block open tag at a line start; its invoke header may follow
    COMPLETE = "complete"  # ... and it did: the turn should close </think> now


class _Step(Enum):
    LINE = "line"  # looking for a block open tag at a line start
    TAG = "tag"  # a '<' at a line start, matching a block open tag
    SPACE = "space"  # after the tag, before the invoke tag
    INVOKE = "invoke"  # matching the invoke tag
    HEADER = "header"  # the invoke header, up to '>'


class ThinkCallWatch:
    def __init__(self) -> None:
        self.state = ThinkCall.NONE
        self._step = _Step.LINE
        self._line_start = True  # reasoning starts at a line start
        self._spelling: Spelling | None = None
        self._held = ""  # TAG: the tag so far; INVOKE/HEADER: the text since the invoke '<'
        self._invoke_line_start = False  # whether that invoke '<' was at a line start

    def feed(self, text: str) -> None:
        """Read text; each step consumes from `pos` on and says where it stopped."""
        pos = 0
        while pos < len(text) and self.state is not ThinkCall.COMPLETE:
            if self._step is _Step.LINE:
                pos = self._line(text, pos)
            elif self._step is _Step.TAG:
                pos = self._tag(text, pos)
            elif self._step is _Step.SPACE:
                pos = self._space(text, pos)
            elif self._step is _Step.INVOKE:
                pos = self._invoke(text, pos)
            else:
                pos = self._header(text, pos)

    def _line(self, text: str, pos: int) -> int:
        if not self._line_start:
            newline = text.find("\n", pos)
            if newline < 0:
                return len(text)
            self._line_start = True
            return newline + 1
        char = text[pos]
        if char == "<":
            self._step, self._held = _Step.TAG, ""
        elif char not in " \t\n":
            self._line_start = False
        else:
            return pos + 1
        return pos

    def _tag(self, text: str, pos: int) -> int:
        while pos < len(text):
            held = self._held + text[pos]
            done = next((s for s in SPELLINGS if s.block_open == held), None)
            if done is not None:
                self.state, self._spelling = ThinkCall.STARTED, done
                self._step, self._line_start = _Step.SPACE, False
                return pos + 1
            if not any(tag.startswith(held) for tag in _BLOCK_OPENS):
                # Not a block tag; this character is no longer at a line start.
                self._step, self._line_start = _Step.LINE, False
                return pos
            self._held, pos = held, pos + 1
        return pos

    def _space(self, text: str, pos: int) -> int:
        while pos < len(text):
            char = text[pos]
            if char not in WHITESPACE:
                self._step, self._held = _Step.INVOKE, ""
                self._invoke_line_start = self._line_start
                return pos
            if char == "\n":
                self._line_start = True
            elif char == "\r":
                self._line_start = False
            pos += 1
        return pos

    def _invoke(self, text: str, pos: int) -> int:
        spelling = self._spelling
        assert spelling is not None
        tag = spelling.invoke_open
        end = min(len(text), pos + len(tag) - len(self._held))
        held = self._held + text[pos:end]
        if not tag.startswith(held):
            return self._reject(held, end)
        self._held = held
        if len(held) == len(tag):
            self._step = _Step.HEADER
        return end

    def _header(self, text: str, pos: int) -> int:
        room = MAX_HEADER - len(self._held)  # '>' must come within MAX_HEADER characters
        gt = text.find(">", pos, pos + room)
        if gt < 0:
            end = min(len(text), pos + room)
            held = self._held + text[pos:end]
            if len(held) >= MAX_HEADER:
                return self._reject(held, end)
            self._held = held
            return end
        spelling = self._spelling
        assert spelling is not None
        header = self._held[len(spelling.invoke_open) :] + text[pos:gt]
        attributes = parse_attributes(header)
        if attributes is not None and attributes.get("name"):
            self.state = ThinkCall.COMPLETE
            return len(text)
        return self._reject(self._held + text[pos : gt + 1], gt + 1)

    def _reject(self, held: str, pos: int) -> int:
        """Not a call after all: look again from the invoke position (it may itself start
        a line-start block tag) through what was read, then go on from `pos`."""
        self.state, self._step = ThinkCall.NONE, _Step.LINE
        self._line_start = self._invoke_line_start
        self.feed(held)  # at most MAX_HEADER characters, each a bounded number of times
        return pos
