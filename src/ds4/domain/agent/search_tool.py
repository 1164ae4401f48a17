"""`search`: matching lines under a path, with context (docs/agent.md "Tools", search).

A result is one matching line; the search stops after max_results of them. Files with
a NUL byte are skipped as binary (the workspace skips files over 16 MiB).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass

from ds4.domain.agent.errors import ToolError
from ds4.domain.agent.text_lines import line_text, split_lines

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
