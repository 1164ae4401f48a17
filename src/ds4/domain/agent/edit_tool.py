"""`edit`: replace one span and show the model where the file moved
(docs/agent.md "Tools", edit)."""

from __future__ import annotations

from ds4.domain.agent.edit_span import Span
from ds4.domain.agent.text_lines import Line, line_of_offset, line_text, split_lines

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
