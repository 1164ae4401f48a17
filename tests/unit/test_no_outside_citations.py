"""No citation of the planning specs that live outside the repository.

Code and docs cite docs/reference/*.md and docs/adr/* instead of server.md, formats.md,
model.md, tokenizer-chat.md, apps.md, DECISIONS.md, "seed 000" or files under ../shared
(docs/reference/citations.md maps the old forms; it is the one file allowed to name them).
A name preceded by a path (`docs/reference/model.md`, `docs/session-model.md`) is in the
repository, and so is a relative Markdown link whose target exists
(`[formats.md §9](formats.md)` inside docs/reference/).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("src", "native", "tests", "tools", "bench", "docs")
EXCLUDED = {
    Path(__file__).resolve(),
    (ROOT / "docs" / "reference" / "citations.md").resolve(),
}
TEXT_SUFFIXES = {".py", ".pyi", ".c", ".h", ".md", ".txt", ".toml", ".cfg", ".ini", ".sh"}
SKIPPED_DIRS = {"__pycache__", "build", ".pytest_cache", ".ruff_cache"}

OUTSIDE = re.compile(
    r"(?<![/\w-])(server|formats|model|tokenizer-chat|apps)\.md\b"
    r"|DECISIONS(\.md)?|seed 000|\.\./shared"
)
MD_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s#]+)(#[^)\s]*)?\)")


def _files() -> list[Path]:
    out = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts):
                continue
            if path.is_file() and path.suffix in TEXT_SUFFIXES and path.resolve() not in EXCLUDED:
                out.append(path)
    return out


def _linked_spans(path: Path, text: str) -> list[tuple[int, int]]:
    """Spans of Markdown links whose relative target exists next to `path`."""
    if path.suffix != ".md":
        return []
    return [
        m.span()
        for m in MD_LINK.finditer(text)
        if "://" not in m.group(1) and (path.parent / m.group(1)).exists()
    ]


def offenders() -> list[str]:
    found = []
    for path in _files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        links = _linked_spans(path, text)
        for m in OUTSIDE.finditer(text):
            if any(start <= m.start() and m.end() <= end for start, end in links):
                continue
            line_no = text.count("\n", 0, m.start()) + 1
            line = text.splitlines()[line_no - 1].strip()
            found.append(f"{path.relative_to(ROOT)}:{line_no}: {m.group(0)!r}: {line[:120]}")
    return found


def test_no_citations_of_files_outside_the_repository() -> None:
    found = offenders()
    assert not found, "citations of files outside the repository:\n" + "\n".join(found)


def test_the_pattern_tells_outside_from_inside() -> None:
    outside = ["formats.md §5.4", "(server.md §6.6)", "DECISIONS.md", "seed 000", "../shared/x"]
    inside = ["docs/reference/model.md §3", "docs/session-model.md", "session-model.md"]
    assert all(OUTSIDE.search(s) for s in outside)
    assert not any(OUTSIDE.search(s) for s in inside)
