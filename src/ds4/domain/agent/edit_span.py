"""Which bytes an `edit` replaces (docs/agent.md "Tools", edit).

Plain form: `old` must occur exactly once in the file. Anchored form (with --edit-upto):
`old` is `head` + `[upto]` + `tail`; the head must be unique in the file, the tail
unique in the bytes after the head's match (it may also occur before the head), and the
span runs from the head's start to the tail's end. The line break right after the
marker is not part of the tail: the head already ends with its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.agent.errors import ToolError

UPTO = b"[upto]"
_BLANK = b" \t\r\n\f\v"


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    anchored: bool  # chosen by the [upto] form


def _occurrences(data: bytes, needle: bytes, start: int = 0, limit: int = 2) -> list[int]:
    """Where `needle` starts in data[start:] (overlaps counted), at most `limit` hits."""
    found: list[int] = []
    at = data.find(needle, start)
    while at >= 0 and len(found) < limit:
        found.append(at)
        at = data.find(needle, at + 1)
    return found


def select_span(data: bytes, old: bytes, *, upto: bool) -> Span:
    if not old:
        raise ToolError("edit requires non-empty old text")
    if upto and UPTO in old:
        return _anchored(data, old)
    hits = _occurrences(data, old)
    if not hits:
        raise ToolError("old text anchor not found")
    if len(hits) > 1:
        raise ToolError("old text anchor is not unique")
    return Span(hits[0], hits[0] + len(old), anchored=False)


def _anchored(data: bytes, old: bytes) -> Span:
    if old.count(UPTO) > 1:
        raise ToolError("old text contains more than one [upto] marker")
    head, _, tail = old.partition(UPTO)
    tail = tail.lstrip(b"\r\n")
    if not tail.strip(_BLANK):
        raise ToolError("old text after [upto] must include a unique tail anchor")
    if not head.strip(_BLANK):
        raise ToolError("old text before [upto] must include a unique head anchor")
    heads = _occurrences(data, head)
    if not heads:
        raise ToolError("old head anchor not found")
    if len(heads) > 1:
        raise ToolError("old head anchor is not unique")
    head_end = heads[0] + len(head)
    tails = _occurrences(data, tail, head_end)
    if not tails:
        raise ToolError("old tail anchor not found after old head")
    if len(tails) > 1:
        raise ToolError("old tail anchor is not unique after old head")
    return Span(heads[0], tails[0] + len(tail), anchored=True)
