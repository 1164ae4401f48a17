"""Live tool-call events from a tool block's elements (docs/reference/chat-and-dsml.md §3.7).

Follows dsml.parser's grammar over the elements dsml.stream reads and reports,
per call index: Started once the invoke header is complete, an arguments fragment "{"
then one per finished parameter (`"key":value`, comma-led after the first; a loose
nested object as one member once it ends) then "}", and Finished with the call.
Fragments use the parser's value encoding, so for a block the parser accepts, the
streamed calls are the parsed ones. At the first element the parser would reject,
streaming stops for the rest of the block; the final parse stays authoritative.
"""

from __future__ import annotations

from enum import Enum

from ds4.domain.dsml.parser import is_string_value, value_json
from ds4.domain.dsml.stream import Element, Tag
from ds4.domain.dsml.syntax import Spelling, ToolCall, json_string
from ds4.domain.generation.events import ToolCallArguments, ToolCallFinished, ToolCallStarted

ToolEvent = ToolCallStarted | ToolCallArguments | ToolCallFinished


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
