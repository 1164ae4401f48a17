"""Live tool-call events from a tool block as it is generated (server.md §4.7).

Walks the block from its open tag and reports, per call index: Started once the
invoke header is complete, an arguments fragment "{" then one per finished
parameter (`"key":value`, comma-led after the first) then "}", and Finished with
the call. Fragments use the final parser's value encoding (dsml.parser), so for a
well-formed block their concatenation equals the parsed arguments. Anything the
walker does not expect (a nested loose object, bad attributes) stops live
streaming for the rest of the block; the final parse stays authoritative.
"""

from __future__ import annotations

from enum import Enum

from ds4.domain.dsml.calls import ToolCall
from ds4.domain.dsml.json_text import is_json, json_string, minify_json
from ds4.domain.dsml.parser import parse_attributes
from ds4.domain.dsml.syntax import SPELLINGS, Spelling, unescape_param_text
from ds4.domain.generation.events import ToolCallArguments, ToolCallFinished, ToolCallStarted

ToolEvent = ToolCallStarted | ToolCallArguments | ToolCallFinished

_WS = " \t\n\r"


class _Where(Enum):
    BETWEEN_INVOKES = "between_invokes"
    BETWEEN_PARAMS = "between_params"
    DONE = "done"
    FAILED = "failed"


def value_json(raw: str, *, is_string: bool, spelling: Spelling) -> str:
    """A parameter body as JSON, exactly as dsml.parser encodes it."""
    if is_string:
        return json_string(unescape_param_text(raw, spelling.param_close))
    literal = raw.strip(_WS)
    if not literal:
        return "null"
    if is_json(literal):
        return minify_json(literal)
    return json_string(raw)


def _is_partial(rest: str, *tags: str) -> bool:
    return any(len(rest) < len(tag) and tag.startswith(rest) for tag in tags)


class ToolCallStreamer:
    def __init__(self, text: str, open_at: int, open_tag: str) -> None:
        """`open_at`: where the block's open tag `open_tag` starts in `text`."""
        spelling = next(s for s in SPELLINGS if s.block_open == open_tag)
        self._s = spelling
        self._pos = open_at + len(open_tag)
        self._where = _Where.BETWEEN_INVOKES
        self._index = 0
        self._name = ""
        self._members: list[str] = []
        self.streamed = 0  # calls whose Started event went out

    @property
    def failed(self) -> bool:
        return self._where is _Where.FAILED

    def update(self, text: str) -> list[ToolEvent]:
        events: list[ToolEvent] = []
        while True:
            if self._where is _Where.BETWEEN_INVOKES:
                progressed = self._between_invokes(text, events)
            elif self._where is _Where.BETWEEN_PARAMS:
                progressed = self._between_params(text, events)
            else:
                return events
            if not progressed:
                return events

    def _skip_ws(self, text: str) -> str:
        while self._pos < len(text) and text[self._pos] in _WS:
            self._pos += 1
        return text[self._pos :]

    def _header(self, text: str, tag: str) -> tuple[dict[str, str], int] | None:
        """(attributes, index after '>'); None to wait; raises ValueError when bad."""
        close = text.find(">", self._pos)
        if close < 0:
            return None
        attributes = parse_attributes(text[self._pos + len(tag) : close])
        if attributes is None or "name" not in attributes:
            raise ValueError(tag)
        return attributes, close + 1

    def _between_invokes(self, text: str, events: list[ToolEvent]) -> bool:
        s = self._s
        rest = self._skip_ws(text)
        if not rest or _is_partial(rest, s.block_close, s.invoke_open):
            return False
        if rest.startswith(s.block_close):
            self._where = _Where.DONE
            return True
        if not rest.startswith(s.invoke_open):
            self._where = _Where.FAILED
            return True
        try:
            head = self._header(text, s.invoke_open)
        except ValueError:
            head = ({}, 0)
        if head is None:
            return False
        attributes, after = head
        if not attributes.get("name"):
            self._where = _Where.FAILED
            return True
        self._name, self._members, self._pos = attributes["name"], [], after
        events.append(ToolCallStarted(self._index, self._name))
        events.append(ToolCallArguments(self._index, "{"))
        self.streamed += 1
        self._where = _Where.BETWEEN_PARAMS
        return True

    def _finish_call(self, events: list[ToolEvent]) -> None:
        call = ToolCall(self._name, "{" + ",".join(self._members) + "}")
        events.append(ToolCallArguments(self._index, "}"))
        events.append(ToolCallFinished(self._index, call))
        self._index += 1

    def _between_params(self, text: str, events: list[ToolEvent]) -> bool:
        s = self._s
        rest = self._skip_ws(text)
        if not rest or _is_partial(rest, s.invoke_close, s.param_open, s.block_close):
            return False
        closers = ((s.invoke_close, _Where.BETWEEN_INVOKES), (s.block_close, _Where.DONE))
        for closing, after in closers:
            if rest.startswith(closing):
                self._pos += len(closing)
                self._finish_call(events)
                self._where = after
                return True
        if not rest.startswith(s.param_open):
            self._where = _Where.FAILED
            return True
        try:
            head = self._header(text, s.param_open)
        except ValueError:
            self._where = _Where.FAILED
            return True
        if head is None:
            return False
        attributes, after_header = head
        if "string" not in attributes:
            # Maybe a loose nested object (parameters inside a parameter): not streamed.
            body = text[after_header:].lstrip(_WS)
            if not body or _is_partial(body, s.param_open):
                return False
            if body.startswith(s.param_open):
                self._where = _Where.FAILED
                return True
        close = text.find(s.param_close, after_header)
        if close < 0:
            return False
        is_string = attributes.get("string", "true") == "true"
        value = value_json(text[after_header:close], is_string=is_string, spelling=s)
        member = json_string(attributes["name"]) + ":" + value
        events.append(ToolCallArguments(self._index, ("," if self._members else "") + member))
        self._members.append(member)
        self._pos = close + len(s.param_close)
        return True
