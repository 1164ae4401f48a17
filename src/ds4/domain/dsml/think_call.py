"""Spot a tool call begun inside reasoning: the forced-`</think>` trigger
(docs/reference/chat-and-dsml.md §3.8, ADR 0020).

The trigger is a block open tag at the start of a line (only spaces or tabs before it,
or the start of the reasoning), then whitespace and a whole invoke header with a
non-empty name. A quoted mention (`"<｜DSML｜tool_calls>"`) never fires. Fed the
reasoning text in pieces of any size, the verdict is the same as on the whole text:
each character is looked at a bounded number of times.
"""

from __future__ import annotations

from enum import Enum

from ds4.domain.dsml.parser import parse_attributes
from ds4.domain.dsml.syntax import SPELLINGS, WHITESPACE, Spelling

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
