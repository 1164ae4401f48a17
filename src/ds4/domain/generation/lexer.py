"""One incremental lexer over a turn's decoded text (docs/reference/server.md §3.4,
docs/reference/chat-and-dsml.md §3.6, §3.7).

Fed the text as it is decoded, in deltas of any size, it returns the events that are
safe to show and keeps the state the decode loop steers by:
- reasoning: from the start (a leading `<think>` skipped) to the first `</think>` when
  the prompt opened thinking; markers and stop strings mean nothing there, except a
  tool call begun at a line start (dsml.stream), which asks for a forced `</think>`;
- text: stop strings are matched here only; with tools, the first block open tag (any
  spelling) ends the text for good, and the whitespace before it is syntax;
- the tool block: dsml.stream says whether the next token is structure (greedy)
  and when the block closed; CallStream (below) turns its elements into calls.
The undecided tail it holds is bounded: a partial marker, `max_stop_len - 1`
characters, and (with tools) the whitespace run before them; a header or value is
kept only until it ends. So every character is handled a bounded number of times
and the cost of a turn is linear in its length. The result does not depend on how
the text was split (tests/unit/generation/test_lexer_properties.py), and
dsml.parser.finish_turn over the whole text stays the authoritative parse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from ds4.domain.dsml.parser import is_string_value, value_json
from ds4.domain.dsml.stream import BlockLexer, Element, Structure, Tag, ThinkCall, ThinkCallWatch
from ds4.domain.dsml.syntax import (
    SPELLINGS,
    THINK_CLOSE,
    THINK_OPEN,
    WHITESPACE,
    Spelling,
    ToolCall,
    json_string,
    partial_tag_at,
)
from ds4.domain.generation.events import (
    ReasoningDelta,
    TextDelta,
    ToolCallArguments,
    ToolCallFinished,
    ToolCallStarted,
)

ToolEvent = ToolCallStarted | ToolCallArguments | ToolCallFinished
LexEvent = ReasoningDelta | TextDelta | ToolEvent

_BLOCK_OPENS = tuple(s.block_open for s in SPELLINGS)
_THINK_CLOSE = (THINK_CLOSE,)


class _Space(Enum):
    """What to do with the whitespace at the end of text being shown."""

    SHOW = "show"
    HOLD = "hold"  # with tools: it may be the separator before a block
    DROP = "drop"  # a block opens right after it: it is syntax


class _Phase(Enum):
    OPENING = "opening"  # thinking: is there a leading <think> to skip?
    REASONING = "reasoning"
    TEXT = "text"
    BLOCK = "block"
    ENDED = "ended"  # a stop string matched: the rest is not part of the turn


def _first_block_open(text: str, start: int) -> tuple[int, Spelling] | None:
    found: tuple[int, Spelling] | None = None
    for spelling in SPELLINGS:
        at = text.find(spelling.block_open, start)
        if at >= 0 and (found is None or at < found[0]):
            found = (at, spelling)
    return found


class TurnLexer:
    def __init__(self, *, thinking: bool, tools_active: bool, stops: Sequence[str] = ()) -> None:
        """`thinking`: the prompt ended with <think>, so the text starts as reasoning;
        `tools_active`: DSML is tool calls (otherwise plain text)."""
        self._tools = tools_active
        self._phase = _Phase.OPENING if thinking else _Phase.TEXT
        self._stops = StopStrings(stops)
        self._watch = ThinkCallWatch() if tools_active and thinking else None
        self._held = ""  # the undecided tail
        self._held_space: list[str] = []  # text with tools: whitespace just before _held
        self._seen = 0  # characters fed so far
        self._block: BlockLexer | None = None
        self._calls: CallStream | None = None
        self.stop: StopHit | None = None
        self.block_at: int | None = None  # where the tool block's open tag starts

    @property
    def in_reasoning(self) -> bool:
        return self._phase in (_Phase.OPENING, _Phase.REASONING)

    @property
    def think_call(self) -> ThinkCall:
        if self._watch is None or not self.in_reasoning:
            return ThinkCall.NONE
        return self._watch.state

    @property
    def force_think_close(self) -> bool:
        """A whole call header was written inside reasoning: feed `</think>` now."""
        return self.think_call is ThinkCall.COMPLETE

    @property
    def structure(self) -> Structure:
        return Structure.OUTSIDE if self._block is None else self._block.structure

    @property
    def greedy(self) -> bool:
        return self.structure.greedy

    @property
    def block_closed(self) -> bool:
        return self._block is not None and self._block.closed

    def feed(self, delta: str) -> list[LexEvent]:
        return self._run(delta, final=False)

    def finish(self) -> list[LexEvent]:
        """The text ended: release everything held."""
        return self._run("", final=True)

    def _run(self, delta: str, *, final: bool) -> list[LexEvent]:
        text, base = self._held + delta, self._seen - len(self._held)
        self._held, self._seen = "", self._seen + len(delta)
        events: list[LexEvent] = []
        pos: int | None = 0
        while pos is not None:
            phase = self._phase
            if phase is _Phase.OPENING:
                pos = self._opening(text, pos, final)
            elif phase is _Phase.REASONING:
                pos = self._reasoning(text, pos, final, events)
            elif phase is _Phase.TEXT:
                pos = self._text(text, pos, base, final, events)
            else:
                if phase is _Phase.BLOCK:
                    self._in_block(text[pos:], events)
                pos = None
        return events

    def _opening(self, text: str, pos: int, final: bool) -> int | None:
        rest = text[pos:]
        if not final and len(rest) < len(THINK_OPEN) and THINK_OPEN.startswith(rest):
            self._held = rest
            return None
        self._phase = _Phase.REASONING
        return pos + len(THINK_OPEN) if rest.startswith(THINK_OPEN) else pos

    def _reasoning(self, text: str, pos: int, final: bool, events: list[LexEvent]) -> int | None:
        close = text.find(THINK_CLOSE, pos)
        if close >= 0:
            end = close
        else:
            end = len(text) if final else partial_tag_at(text, _THINK_CLOSE, pos)
        if end > pos:
            events.append(ReasoningDelta(text[pos:end]))
        if close >= 0:
            self._phase = _Phase.TEXT
            return close + len(THINK_CLOSE)
        if self._watch is not None:
            self._watch.feed(text[pos:end])
        self._held = text[end:]
        return None

    def _text(
        self, text: str, pos: int, base: int, final: bool, events: list[LexEvent]
    ) -> int | None:
        stop = self._stops.first(text, pos)
        block = _first_block_open(text, pos) if self._tools else None
        if stop is not None and (
            block is None or stop[0] + len(stop[1]) <= block[0] + len(block[1].block_open)
        ):
            at, string = stop
            self._show(text[pos:at], events)
            self.stop, self._phase = StopHit(string, base + at), _Phase.ENDED
            return None
        if block is not None:
            at, spelling = block
            self._show(text[pos:at], events, _Space.DROP)
            self.block_at = base + at
            self._block, self._calls = BlockLexer(spelling), CallStream(spelling)
            self._phase = _Phase.BLOCK
            return at + len(spelling.block_open)
        end = len(text)
        if not final:
            end = max(pos, end - self._stops.hold)
            if self._tools:
                end = min(end, partial_tag_at(text, _BLOCK_OPENS, pos))
        self._show(text[pos:end], events, _Space.HOLD if self._tools and not final else _Space.SHOW)
        self._held = text[end:]
        return None

    def _show(self, text: str, events: list[LexEvent], tail: _Space = _Space.SHOW) -> None:
        """Emit text, after the whitespace held before it (dropped before a block)."""
        body = text if tail is _Space.SHOW else text.rstrip(WHITESPACE)
        if tail is _Space.DROP and not body:
            self._held_space = []  # all of it separates the block
        if body or (tail is _Space.SHOW and self._held_space):
            events.append(TextDelta("".join(self._held_space) + body))
            self._held_space = []
        if tail is _Space.HOLD and len(body) < len(text):
            self._held_space.append(text[len(body) :])

    def _in_block(self, text: str, events: list[LexEvent]) -> None:
        assert self._block is not None and self._calls is not None
        if text:
            events += self._calls.feed(self._block.feed(text))


# ---- stop strings over visible text fed in pieces (docs/reference/server.md §3.4) ----


@dataclass(frozen=True, slots=True)
class StopHit:
    """The stop string that ended the turn and where it starts in the generated text."""

    string: str
    at: int


class StopStrings:
    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(dict.fromkeys(s for s in stops if s))
        # The tail that may still become a stop string
        # (docs/reference/server.md §3.4: max_stop_len - 1).
        self.hold = max((len(s) for s in self._stops), default=1) - 1

    def first(self, text: str, start: int = 0) -> tuple[int, str] | None:
        """(position, stop) of the match in text[start:] that is complete first; of two
        complete at the same character, the one that starts earlier. A caller that
        feeds text in pieces and keeps `hold` characters of context gets the same
        answer for every split: matches ending in earlier text were already seen."""
        best: tuple[int, int, str] | None = None
        for stop in self._stops:
            pos = text.find(stop, start)
            if pos >= 0 and (best is None or (pos + len(stop), pos) < best[:2]):
                best = (pos + len(stop), pos, stop)
        return None if best is None else (best[1], best[2])


# ---- live tool-call events from a tool block's elements ------------------------------
# (docs/reference/chat-and-dsml.md §3.7)
# Follows dsml.parser's grammar over the elements dsml.stream reads and reports, per
# call index: Started once the invoke header is complete, an arguments fragment "{"
# then one per finished parameter (`"key":value`, comma-led after the first; a loose
# nested object as one member once it ends) then "}", and Finished with the call.
# Fragments use the parser's value encoding, so for a block the parser accepts, the
# streamed calls are the parsed ones. At the first element the parser would reject,
# streaming stops for the rest of the block; the final parse stays authoritative.


class _Expect(Enum):
    INVOKE = "invoke"  # between invokes
    PARAM = "param"  # between the parameters of an open invoke
    VALUE = "value"  # a parameter header was read
    LEAF_VALUE = "leaf_value"
    LOOSE = "loose"  # after a leaf: another leaf, or the object ends
    DONE = "done"
    FAILED = "failed"


class CallStream:
    def __init__(self, spelling: Spelling) -> None:
        self._spelling = spelling
        self._expect = _Expect.INVOKE
        self._index = 0
        self._name = ""
        self._members: list[str] = []
        self._key = ""  # the open parameter's name
        self._attributes: dict[str, str] = {}  # ... and its attributes
        self._leaves: list[str] = []  # the loose object's members so far

    def feed(self, elements: list[Element]) -> list[ToolEvent]:
        events: list[ToolEvent] = []
        for element in elements:
            self._take(element, events)
        return events

    def _take(self, element: Element, events: list[ToolEvent]) -> None:
        expect, tag = self._expect, element.tag
        if expect is _Expect.INVOKE:
            self._between_invokes(element, events)
        elif expect is _Expect.PARAM:
            self._between_params(element, events)
        elif expect is _Expect.VALUE and tag is Tag.VALUE and element.value is not None:
            self._member(self._key, self._value(element.value, self._attributes), events)
            self._expect = _Expect.PARAM
        elif expect is _Expect.VALUE and tag is Tag.PARAM_OPEN:
            self._leaves = []  # the block lexer saw a loose object begin
            self._open_leaf(element)
        elif expect is _Expect.LEAF_VALUE and tag is Tag.VALUE and element.value is not None:
            value = self._value(element.value, self._attributes)
            self._leaves.append(json_string(self._attributes["name"]) + ":" + value)
            self._expect = _Expect.LOOSE
        elif expect is _Expect.LOOSE:
            self._after_leaf(element, events)
        elif expect is not _Expect.DONE:
            self._expect = _Expect.FAILED

    def _between_invokes(self, element: Element, events: list[ToolEvent]) -> None:
        attributes = element.attributes
        if element.tag is Tag.BLOCK_CLOSE:
            self._expect = _Expect.DONE
        elif element.tag is Tag.INVOKE_OPEN and attributes and attributes.get("name"):
            self._name, self._members = attributes["name"], []
            events += (
                ToolCallStarted(self._index, self._name),
                ToolCallArguments(self._index, "{"),
            )
            self._expect = _Expect.PARAM
        else:
            self._expect = _Expect.FAILED

    def _between_params(self, element: Element, events: list[ToolEvent]) -> None:
        attributes = element.attributes
        if element.tag in (Tag.INVOKE_CLOSE, Tag.BLOCK_CLOSE):  # block close: invoke close left out
            call = ToolCall(self._name, "{" + ",".join(self._members) + "}")
            events += (ToolCallArguments(self._index, "}"), ToolCallFinished(self._index, call))
            self._index += 1
            self._expect = _Expect.INVOKE if element.tag is Tag.INVOKE_CLOSE else _Expect.DONE
        elif element.tag is Tag.PARAM_OPEN and attributes is not None and "name" in attributes:
            self._key, self._attributes = attributes["name"], attributes
            self._expect = _Expect.VALUE
        else:
            self._expect = _Expect.FAILED

    def _open_leaf(self, element: Element) -> None:
        attributes = element.attributes
        if attributes is None or "name" not in attributes:
            self._expect = _Expect.FAILED
            return
        self._attributes, self._expect = attributes, _Expect.LEAF_VALUE

    def _after_leaf(self, element: Element, events: list[ToolEvent]) -> None:
        if element.tag is Tag.PARAM_OPEN:
            self._open_leaf(element)
            return
        self._member(self._key, "{" + ",".join(self._leaves) + "}", events)
        self._expect = _Expect.PARAM
        if element.tag is not Tag.PARAM_CLOSE:
            self._take(element, events)  # the object ended without its own close tag

    def _value(self, raw: str, attributes: dict[str, str]) -> str:
        return value_json(raw, is_string=is_string_value(attributes), spelling=self._spelling)

    def _member(self, key: str, value: str, events: list[ToolEvent]) -> None:
        member = json_string(key) + ":" + value
        events.append(ToolCallArguments(self._index, ("," if self._members else "") + member))
        self._members.append(member)
