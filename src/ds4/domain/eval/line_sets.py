"""Line specs (`11`, `17-20`, `3,13-15`; `0` means "no vulnerable line") and their sets
(docs/reference/eval.md §5.3)."""

from __future__ import annotations

import re

MAX_LINE = 255  # line numbers are clamped to 0..255 when specs are compared
_PART = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")


def _digits_end(text: str, i: int) -> int:
    while i < len(text) and "0" <= text[i] <= "9":
        i += 1
    return i


def _spaces_end(text: str, i: int) -> int:
    while i < len(text) and text[i] == " ":
        i += 1
    return i


def compact_line_spec(text: str) -> str:
    """Every number of `text` as a spec, `a - b` kept as a range, anything else
    ignored: `line 9` -> `9`, `9 and 15` -> `9,15`, `20 - 22` -> `20-22`."""
    parts: list[str] = []
    i = 0
    while i < len(text):
        if not "0" <= text[i] <= "9":
            i += 1
            continue
        end = _digits_end(text, i)
        low, i = text[i:end], end
        dash = _spaces_end(text, i)
        if dash < len(text) and text[dash] == "-":
            start = _spaces_end(text, dash + 1)
            stop = _digits_end(text, start)
            if stop > start:
                parts.append(f"{low}-{text[start:stop]}")
                i = stop
                continue
        parts.append(low)
    return ",".join(parts)


def _clamp(value: int) -> int:
    return min(max(value, 0), MAX_LINE)


def line_set(spec: str) -> frozenset[int]:
    """The lines a spec names (ranges inclusive, reversed ones swapped, clamped);
    parts that are not numbers or ranges name nothing."""
    lines: set[int] = set()
    for part in spec.split(","):
        match = _PART.fullmatch(part)
        if match is None:
            continue
        low = _clamp(int(match.group(1)))
        high = _clamp(int(match.group(2))) if match.group(2) is not None else low
        lines.update(range(min(low, high), max(low, high) + 1))
    return frozenset(lines)


def is_line_spec(spec: str) -> bool:
    """Every comma-separated part is a number or a range (a key must be)."""
    return bool(spec) and all(_PART.fullmatch(part) for part in spec.split(","))


def line_set_passes(picked: str, key: str) -> bool:
    """Every extracted line is in the key, and at least one line was extracted."""
    got = line_set(picked)
    return bool(got) and got <= line_set(key)
