"""Lines of a file's bytes as the agent's tools count them: split on `\\n`, `\\r\\n` or
`\\r`; a line's content excludes its terminator; a final line without one still counts."""

from __future__ import annotations

from dataclasses import dataclass


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
