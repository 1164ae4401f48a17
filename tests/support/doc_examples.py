"""The fenced `python` blocks of a Markdown page: the examples a test runs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIBRARY_DOC = REPO / "docs" / "library.md"
DEMO_MODEL = "models/demo.gguf"  # the path the examples open, relative to the repository

_FENCE = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
_HEADING = re.compile(r"^#+ (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Example:
    heading: str  # the section it appears under
    line: int  # 1-based line of its first code line in the page
    code: str


def python_examples(page: Path = LIBRARY_DOC) -> list[Example]:
    text = page.read_text(encoding="utf-8")
    examples = []
    for match in _FENCE.finditer(text):
        headings = _HEADING.findall(text, 0, match.start())
        line = text.count("\n", 0, match.start(1)) + 1
        examples.append(Example(headings[-1] if headings else "", line, match.group(1)))
    return examples
