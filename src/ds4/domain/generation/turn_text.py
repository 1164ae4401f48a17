"""Split a turn's growing text into reasoning and visible-text deltas (server.md §3.9).

Fed the whole decoded text after every token, `TurnTextSplitter.update` returns only
what is safe to show now:
- reasoning runs from the start (a leading `<think>` skipped) to the first
  `</think>`; its last 7 characters are held while they might start that tag;
- visible text follows; stop strings are searched only there (never in reasoning,
  DECISIONS.md) and the last max_stop_len-1 characters are held until they cannot
  start one; the text is cut where a stop string begins;
- with tools, text ends for good where a tool block opens (the whitespace before it
  is syntax), and a trailing `<...` that could still become a block tag is held.
With final=True everything left is released.
"""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.dsml.syntax import SPELLINGS

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
_WS = " \t\n\r"
_BLOCK_OPENS = tuple(s.block_open for s in SPELLINGS)
_LONGEST_OPEN = max(len(tag) for tag in _BLOCK_OPENS)


@dataclass(frozen=True)
class SplitDelta:
    reasoning: str = ""
    text: str = ""


@dataclass(frozen=True)
class BlockOpen:
    """Where the tool block's open tag starts in the text, and which tag it is."""

    at: int
    tag: str


def _could_open_block(tail: str) -> bool:
    return any(len(tail) < len(tag) and tag.startswith(tail) for tag in _BLOCK_OPENS)


class TurnTextSplitter:
    def __init__(self, *, thinking: bool, tools_active: bool, stops: tuple[str, ...] = ()) -> None:
        """`thinking`: the prompt ended with <think>, so the text starts as reasoning."""
        self._stops = tuple(s for s in stops if s)
        self._stop_hold = max((len(s) for s in self._stops), default=1) - 1
        self._tools = tools_active
        self._reasoning_from: int | None = None if thinking else 0
        self._reasoning_done = not thinking
        self._reasoning_emitted = 0
        self._content_start = 0
        self._content_emitted = 0
        self._stop_scan = 0
        self._block_scan = 0
        self.stop: str | None = None  # the stop string that matched
        self.stop_at: int | None = None  # where it starts in the text
        self.block: BlockOpen | None = None

    @property
    def in_reasoning(self) -> bool:
        return not self._reasoning_done

    def update(self, text: str, *, final: bool = False) -> SplitDelta:
        reasoning = "" if self._reasoning_done else self._reasoning(text, final)
        if not self._reasoning_done:
            return SplitDelta(reasoning=reasoning)
        return SplitDelta(reasoning=reasoning, text=self._content(text, final))

    def _reasoning(self, text: str, final: bool) -> str:
        if self._reasoning_from is None:
            if not final and len(text) < len(THINK_OPEN) and THINK_OPEN.startswith(text):
                return ""  # maybe the start of a leading <think>
            self._reasoning_from = len(THINK_OPEN) if text.startswith(THINK_OPEN) else 0
            self._reasoning_emitted = self._reasoning_from
        close = text.find(THINK_CLOSE, self._reasoning_from)
        if close >= 0:
            end = close
            self._reasoning_done = True
            self._content_start = close + len(THINK_CLOSE)
            self._content_emitted = self._stop_scan = self._block_scan = self._content_start
        elif final:
            end = len(text)
        else:
            end = max(self._reasoning_emitted, len(text) - (len(THINK_CLOSE) - 1))
        delta = text[self._reasoning_emitted : end]
        self._reasoning_emitted = end
        return delta

    def _content(self, text: str, final: bool) -> str:
        if self.block is not None:
            return ""  # after a tool block opens, the rest is tool calls
        limit = len(text) if self.stop_at is None else self.stop_at
        if self.stop_at is None and self._stops:
            limit = self._find_stop(text)
        block = self._find_block(text, limit) if self._tools else None
        if block is not None:
            end = block.at
            while end > self._content_emitted and text[end - 1] in _WS:
                end -= 1
        elif final or self.stop_at is not None:
            end = limit
        else:
            end = self._held_end(text, limit)
        if end <= self._content_emitted:
            return ""
        delta = text[self._content_emitted : end]
        self._content_emitted = end
        return delta

    def _find_stop(self, text: str) -> int:
        hits = [(pos, s) for s in self._stops if (pos := text.find(s, self._stop_scan)) >= 0]
        if hits:
            self.stop_at, self.stop = min(hits, key=lambda hit: hit[0])
            return self.stop_at
        self._stop_scan = max(self._stop_scan, len(text) - self._stop_hold)
        return len(text)

    def _find_block(self, text: str, limit: int) -> BlockOpen | None:
        found = [
            (pos, tag)
            for tag in _BLOCK_OPENS
            if 0 <= (pos := text.find(tag, self._block_scan, limit)) <= limit - len(tag)
        ]
        if found:
            self.block = BlockOpen(*min(found))
        else:
            self._block_scan = max(self._block_scan, limit - _LONGEST_OPEN + 1)
        return self.block

    def _held_end(self, text: str, limit: int) -> int:
        end = max(self._content_emitted, limit - self._stop_hold)
        if self._tools:
            while end > self._content_emitted and text[end - 1] in _WS:
                end -= 1  # may be the separator before a tool block
            lt = text.rfind("<", max(self._content_emitted, limit - _LONGEST_OPEN), limit)
            if lt >= 0 and _could_open_block(text[lt:limit]):
                end = min(end, lt)
                while end > self._content_emitted and text[end - 1] in _WS:
                    end -= 1
        return end
