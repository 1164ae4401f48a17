"""The agent's file tools (docs/agent.md "Tools"): where they may go without asking,
lines as they count them, and what `read`/`more`, `list`, `search` and `edit` show the
model, with the streaming check that stops an `edit` whose `old` selects nothing.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ds4.domain.agent.tool_catalog import ToolError
from ds4.domain.generation.events import GenerationEvent, ToolCallArguments, ToolCallStarted
from ds4.ports.agent import DirEntry

# --- text lines ---
# Lines of a file's bytes as the agent's tools count them: split on `\n`, `\r\n` or
# `\r`; a line's content excludes its terminator; a final line without one still counts.


@dataclass(frozen=True, slots=True)
class Line:
    start: int  # offset of the first byte
    end: int  # offset just past the content (the terminator starts here)
    stop: int  # offset just past the terminator (== end for a last unterminated line)


def split_lines(data: bytes) -> list[Line]:
    lines: list[Line] = []
    start = i = 0
    n = len(data)
    while i < n:
        byte = data[i]
        if byte == 0x0A:
            lines.append(Line(start, i, i + 1))
            i += 1
            start = i
        elif byte == 0x0D:
            stop = i + 2 if i + 1 < n and data[i + 1] == 0x0A else i + 1
            lines.append(Line(start, i, stop))
            i = stop
            start = i
        else:
            i += 1
    if start < n:
        lines.append(Line(start, n, n))
    return lines


def line_text(data: bytes, line: Line) -> str:
    return data[line.start : line.end].decode("utf-8", errors="replace")


def line_of_offset(lines: list[Line], offset: int) -> int:
    """The 1-based number of the line holding byte `offset` (the last line past the end)."""
    low, high = 0, len(lines) - 1
    if high < 0:
        return 1
    while low < high:
        mid = (low + high) // 2
        if lines[mid].stop <= offset:
            low = mid + 1
        else:
            high = mid
    return low + 1


def count_lines(data: bytes) -> int:
    """Newlines plus one when the last byte is not a newline (bash output statistics)."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


# --- search tool ---
# `search`: matching lines under a path, with context (docs/agent.md "Tools", search).
#
# A result is one matching line; the search stops after max_results of them. Files with
# a NUL byte are skipped as binary (the workspace skips files over 16 MiB).

Matcher = Callable[[str], bool]


@dataclass(frozen=True)
class SearchQuery:
    query: str
    regex: bool = False
    glob: str | None = None
    context: int = 0  # 0..5 lines around each match
    max_results: int = 50  # 1..500
    case_sensitive: bool = True


def line_matcher(q: SearchQuery) -> Matcher:
    if q.regex:
        try:
            pattern = re.compile(q.query, 0 if q.case_sensitive else re.IGNORECASE)
        except re.error as exc:
            raise ToolError(f"invalid regex: {exc}") from None
        return lambda line: pattern.search(line) is not None
    if q.case_sensitive:
        return lambda line: q.query in line
    needle = q.query.casefold()
    return lambda line: needle in line.casefold()


def glob_allows(glob: str | None, path: str) -> bool:
    """The glob matches the file's base name or its whole path."""
    if not glob:
        return True
    base = path.rsplit("/", 1)[-1]
    return fnmatch.fnmatchcase(base, glob) or fnmatch.fnmatchcase(path, glob)


class SearchReport:
    """Collects matches file by file until the result budget is spent."""

    def __init__(self, q: SearchQuery) -> None:
        self._q = q
        self._match = line_matcher(q)
        self._blocks: list[str] = []
        self.results = 0

    def full(self) -> bool:
        return self.results >= self._q.max_results

    def add_file(self, path: str, data: bytes) -> None:
        if self.full() or b"\0" in data:
            return
        lines = split_lines(data)
        texts = [line_text(data, line) for line in lines]
        shown: list[str] = []
        last_shown = 0  # 1-based number of the last line printed (context never repeats)
        for number, text in enumerate(texts, start=1):
            if self.full():
                break
            if not self._match(text):
                continue
            self.results += 1
            first = max(last_shown + 1, number - self._q.context)
            last = min(len(texts), number + self._q.context)
            for n in range(first, last + 1):
                shown.append(f"  {n} {texts[n - 1]}")
            last_shown = last
        if shown:
            self._blocks.append(path + "\n" + "\n".join(shown) + "\n\n")

    def text(self) -> str:
        if not self.results:
            return "No matches\n"
        noun = "match" if self.results == 1 else "matches"
        return f"{self.results} {noun} shown\n\n" + "".join(self._blocks)


# --- paths ---
# Where the agent's file tools may go without asking: inside the working directory.
#
# A path that resolves (symlinks followed, by the workspace) outside the root needs the
# user's yes, whatever the tool; the checks here are on resolved absolute paths only.


def is_inside(root: str, resolved: str) -> bool:
    """`resolved` is `root` or below it (both absolute and normalized)."""
    root = posixpath.normpath(root)
    resolved = posixpath.normpath(resolved)
    if root == "/":
        return True
    return resolved == root or resolved.startswith(root + "/")


# --- read tool ---
# `read` and `more`: a file's lines in numbered or raw chunks, and the cursor `more`
# continues from (docs/agent.md "Tools").

DEFAULT_LINES = 500


@dataclass(frozen=True)
class ReadCursor:
    """Where `more` goes on: the next line of the last read that stopped early."""

    path: str
    next_line: int
    raw: bool


@dataclass(frozen=True)
class ReadResult:
    text: str
    cursor: ReadCursor | None  # None: the read reached the end of the file


def read_chunk(
    path: str, data: bytes, *, start: int, max_lines: int, whole: bool, raw: bool
) -> ReadResult:
    """Lines start.. of `data` (1-based), at most max_lines unless whole."""
    lines = split_lines(data)
    total = len(lines)
    first = max(1, start)
    last = total if whole else min(total, first + max_lines - 1)
    if total == 0:
        return ReadResult(f"{path}: lines 0-0 of 0\n", None)
    if first > total:
        return ReadResult(f"{path}: lines {first}-{first - 1} of {total} (past the end)\n", None)
    chosen = lines[first - 1 : last]
    more = last < total
    cursor = ReadCursor(path, last + 1, raw) if more else None
    if raw:
        body = data[chosen[0].start : chosen[-1].stop].decode("utf-8", errors="replace")
        if not body.endswith(("\n", "\r")):
            body += "\n"
        if more:
            body += (
                f"[Read truncated at line {last} of {total}. continue_offset={last + 1}. "
                f"Call more with count={max_lines} to read the next chunk.]\n"
            )
        return ReadResult(body, cursor)
    header = f"{path}: lines {first}-{last} of {total}"
    if more:
        header += (
            f"; continue_offset={last + 1}; call more with count={max_lines} to read the next chunk"
        )
    numbered = "".join(f"{first + i} {line_text(data, line)}\n" for i, line in enumerate(chosen))
    return ReadResult(header + "\n" + numbered, cursor)


# --- list tool ---
# `list`: one directory's entries (docs/agent.md "Tools", list).

MAX_ENTRIES = 300


def list_report(path: str, entries: Sequence[DirEntry]) -> str:
    """`<path>:` then `<kind> <size> <name>` rows in directory order (`/` after a
    directory's name), at most 300."""
    out = [f"{path}:"]
    for entry in entries[:MAX_ENTRIES]:
        slash = "/" if entry.kind == "d" else ""
        out.append(f"{entry.kind} {entry.size:>10} {entry.name}{slash}")
    if len(entries) > MAX_ENTRIES:
        out.append("... more entries omitted ...")
    return "\n".join(out) + "\n"


# --- edit span ---
# Which bytes an `edit` replaces (docs/agent.md "Tools", edit).
#
# Plain form: `old` must occur exactly once in the file. Anchored form (with --edit-upto):
# `old` is `head` + `[upto]` + `tail`; the head must be unique in the file, the tail
# unique in the bytes after the head's match (it may also occur before the head), and the
# span runs from the head's start to the tail's end. The line break right after the
# marker is not part of the tail: the head already ends with its own.

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


# --- edit tool ---
# `edit`: replace one span and show the model where the file moved
# (docs/agent.md "Tools", edit).

CONTEXT_BEFORE = 5
CONTEXT_AFTER = 8
SHOWN_EDGE = 18  # an edited region over 2 * 18 lines shows its first and last 18


def apply_edit(data: bytes, span: Span, new: bytes) -> bytes:
    return data[: span.start] + new + data[span.end :]


def _numbered(data: bytes, lines: list[Line], first: int, last: int) -> list[str]:
    return [f"{n} {line_text(data, lines[n - 1])}" for n in range(first, last + 1)]


def edit_report(path: str, old_data: bytes, span: Span, new_data: bytes) -> str:
    old_lines = split_lines(old_data)
    new_lines = split_lines(new_data)
    first = line_of_offset(old_lines, span.start)
    last = line_of_offset(old_lines, max(span.start, span.end - 1))
    shift = len(new_lines) - len(old_lines)
    how = "anchored old/new replacement" if span.anchored else "old/new replacement"
    out = [
        f"Edited {path} using {how}",
        f"Touched old lines {first}-{last}; current post-edit context follows.",
    ]
    if shift:
        out.append(
            f"Line shift: old lines after {last} moved by {shift:+d} (old line {last + 1} "
            f"is now line {last + 1 + shift}). Re-read before relying on old line numbers "
            "there."
        )
    total = len(new_lines)
    edited_last = min(total, max(first - 1, last + shift))
    top = max(1, first - CONTEXT_BEFORE)
    bottom = min(total, max(edited_last, first - 1) + CONTEXT_AFTER)
    out.append(f"Current file around edit: {path} lines {top}-{bottom} of {total}")
    out += _numbered(new_data, new_lines, top, min(bottom, first - 1))
    edited = edited_last - first + 1
    if edited > 2 * SHOWN_EDGE:
        out += _numbered(new_data, new_lines, first, first + SHOWN_EDGE - 1)
        out.append(f"... {edited - 2 * SHOWN_EDGE} edited lines omitted ...")
        out += _numbered(new_data, new_lines, edited_last - SHOWN_EDGE + 1, edited_last)
    elif edited > 0:
        out += _numbered(new_data, new_lines, first, edited_last)
    out += _numbered(new_data, new_lines, max(edited_last, first - 1) + 1, bottom)
    return "\n".join(out) + "\n"


# --- edit preflight ---
# The streaming check of an `edit` (docs/agent.md "Tools", edit): as soon as a call's
# `path` and `old` are both complete, see whether `old` selects a span of the file. When
# it does not, the worker stops generation before `new` is sampled and returns the
# reason as the tool result.

SelectorCheck = Callable[[str, str], str | None]  # (path, old) -> reason or None


class EditPreflight:
    def __init__(self, check: SelectorCheck) -> None:
        self._check = check
        self._calls: dict[int, tuple[str, dict[str, object]]] = {}
        self._checked: set[int] = set()
        self.failed: str | None = None

    def feed(self, event: GenerationEvent) -> None:
        if isinstance(event, ToolCallStarted):
            self._calls[event.index] = (event.name, {})
        elif isinstance(event, ToolCallArguments) and event.index in self._calls:
            self._member(event.index, event.fragment)

    def _member(self, index: int, fragment: str) -> None:
        body = fragment.lstrip(",")
        if body in ("{", "}", ""):
            return
        try:
            value = json.loads("{" + body + "}")
        except ValueError:
            return
        if not isinstance(value, dict):
            return
        name, args = self._calls[index]
        args.update(value)
        if name != "edit" or index in self._checked or self.failed is not None:
            return
        path, old = args.get("path"), args.get("old")
        if isinstance(path, str) and isinstance(old, str):
            self._checked.add(index)
            self.failed = self._check(path, old)
