"""`read` and `more`: a file's lines in numbered or raw chunks, and the cursor `more`
continues from (docs/agent.md "Tools")."""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.agent.text_lines import line_text, split_lines

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
