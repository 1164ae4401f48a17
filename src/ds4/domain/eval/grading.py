"""Final answers (docs/reference/eval.md §5): line specs and their sets, extraction from a
model's raw output, and grading the extracted answer against a case's key and aliases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ds4.domain.eval.cases import CHOICE_LETTERS, AnswerKind, EvalCase

# --- line sets ---
# Line specs (`11`, `17-20`, `3,13-15`; `0` means "no vulnerable line") and their sets
# (docs/reference/eval.md §5.3).

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


# --- extract ---
# Final-answer extraction from a model's raw output (docs/reference/eval.md §5).
#
# Works on the UTF-8 bytes of the output, so every window and offset is the one the
# reference harness uses; what comes out is ASCII. `visible` is the text after the
# first `</think>` (all of it when there is none); the answer marker is the last
# `answer` word followed by a colon, else the first `answer` anywhere.

NOTHING = "?"  # what an extractor returns when the output holds no answer
THINK_CLOSE = b"</think>"
MC_WINDOW = 96  # bytes scanned after the marker for a choice letter
NUMBER_WINDOW = 160  # bytes after the marker an integer or line set is read from
_WORD = b"answer"
_NEGATIONS = frozenset(
    {
        "not", "except", "excluding", "exclude", "excludes", "eliminate", "eliminates",
        "eliminated", "reject", "rejects", "rejected", "rejecting",
    }
)  # fmt: skip
_RULE = frozenset({"rule", "rules", "ruled"})
_MAX_WORD = 15  # a negation word is shorter than 16 characters
_SPACE = b" \t\r\n\x0b\x0c"


def visible_text(output: bytes) -> bytes:
    at = output.find(THINK_CLOSE)
    return output if at < 0 else output[at + len(THINK_CLOSE) :]


def _is_letter(byte: int) -> bool:
    return 0x41 <= byte <= 0x5A or 0x61 <= byte <= 0x7A


def _letter_at(text: bytes, i: int) -> bool:
    return 0 <= i < len(text) and _is_letter(text[i])


def colon_markers(visible: bytes) -> list[int]:
    """Starts of every `answer` word (non-letters both sides) followed by optional
    whitespace and a colon, in order."""
    lower, found, start = visible.lower(), [], 0
    while (at := lower.find(_WORD, start)) >= 0:
        start = at + 1
        end = at + len(_WORD)
        if _letter_at(visible, at - 1) or _letter_at(visible, end):
            continue
        while end < len(visible) and visible[end] in _SPACE:
            end += 1
        if end < len(visible) and visible[end] == ord(":"):
            found.append(at)
    return found


def answer_marker(visible: bytes) -> int | None:
    """The last colon marker, else the first `answer` anywhere, else None."""
    markers = colon_markers(visible)
    if markers:
        return markers[-1]
    at = visible.lower().find(_WORD)
    return None if at < 0 else at


def has_final_answer_line(output: bytes) -> bool:
    """Whether the visible text holds an `Answer:` marker (--retry-incomplete)."""
    return bool(colon_markers(visible_text(output)))


# ---- multiple choice --------------------------------------------------------------


def _boundary(text: bytes, i: int) -> bool:
    """Neither neighbour of text[i] is an ASCII letter (before the start: a space)."""
    return not _letter_at(text, i - 1) and not _letter_at(text, i + 1)


def _starts_word(text: bytes, i: int) -> bool:
    """A capital followed by blanks and a lowercase letter begins an English word."""
    j = i + 1
    if j >= len(text) or text[j] not in b" \t":
        return False
    while j < len(text) and text[j] in b" \t":
        j += 1
    return j < len(text) and 0x61 <= text[j] <= 0x7A


def _word_before(text: bytes, end: int, floor: int) -> tuple[str, int]:
    """The word (letters and apostrophes) ending at `end`, lowercased, and its start;
    ("", end) when there is none or it is too long to be a negation."""
    start = end
    while start > floor and (_is_letter(text[start - 1]) or text[start - 1] == ord("'")):
        start -= 1
    if end - start > _MAX_WORD:
        return "", end
    return text[start:end].decode("ascii").lower(), start


def _skip_back(text: bytes, i: int, floor: int, over: bytes) -> int:
    while i > floor and text[i - 1] in over:
        i -= 1
    return i


def _negated(text: bytes, i: int, floor: int) -> bool:
    """Walking back over blanks, commas and semicolons (never across a newline, never
    before the marker): is the word before the letter a negation?"""
    end = _skip_back(text, i, floor, b" \t,;")
    word, start = _word_before(text, end, floor)
    if not word:
        return False
    if word.endswith("n't") or word in _NEGATIONS:
        return True
    if word == "out":
        previous, _ = _word_before(text, _skip_back(text, start, floor, b" \t"), floor)
        return previous in _RULE
    return False


def extract_choice(output: bytes, n_choices: int) -> str:
    valid = CHOICE_LETTERS[:n_choices].encode()
    visible = visible_text(output)
    marker = answer_marker(visible)
    if marker is not None:
        for i in range(marker, min(marker + MC_WINDOW, len(visible))):
            byte = visible[i : i + 1].upper()
            if byte not in valid or not _boundary(visible, i):
                continue
            after = visible[i + 1 : i + 2]
            if after == b"'" or _starts_word(visible, i) or _negated(visible, i, marker):
                continue
            return byte.decode()
    for i in range(len(visible) - 1, -1, -1):
        byte = visible[i : i + 1].upper()
        if byte in valid and _boundary(visible, i):
            return byte.decode()
    return NOTHING


# ---- integers and line sets -------------------------------------------------------


def _digit_runs(text: bytes) -> list[tuple[int, int]]:
    runs, i = [], 0
    while i < len(text):
        if 0x30 <= text[i] <= 0x39:
            j = i
            while j < len(text) and 0x30 <= text[j] <= 0x39:
                j += 1
            runs.append((i, j))
            i = j
        else:
            i += 1
    return runs


def normalize_integer(digits: str) -> str:
    """Leading zeros dropped, one digit kept (`082` -> `82`, `000` -> `0`)."""
    if not digits:
        return NOTHING
    return digits.lstrip("0") or "0"


def _marker_window(visible: bytes, marker: int) -> bytes:
    window = visible[marker : min(marker + NUMBER_WINDOW, len(visible))]
    newline = window.find(b"\n")
    return window if newline < 0 else window[:newline]


def extract_integer(output: bytes) -> str:
    visible = visible_text(output)
    marker = answer_marker(visible)
    if marker is not None:
        window = _marker_window(visible, marker)
        equals = window.rfind(b"=")
        runs = _digit_runs(window[equals + 1 :]) if equals >= 0 else []
        if equals >= 0 and runs:
            start, end = runs[0]
            return normalize_integer(window[equals + 1 + start : equals + 1 + end].decode())
        runs = _digit_runs(window)
        if runs:
            return normalize_integer(window[runs[0][0] : runs[0][1]].decode())
    runs = _digit_runs(visible)
    if runs:
        return normalize_integer(visible[runs[-1][0] : runs[-1][1]].decode())
    return NOTHING


def extract_line_set(output: bytes) -> str:
    visible = visible_text(output)
    marker = answer_marker(visible)
    if marker is not None:
        spec = compact_line_spec(_marker_window(visible, marker).decode("ascii", "replace"))
        if spec:
            return spec
    return extract_integer(output)


# ---- ordered sequences (ours) -----------------------------------------------------


def sequence_items(text: str, key: str) -> list[str]:
    """The items of a sequence, read the way the key is written: single letters,
    integers, or comma-separated words (lowercased, blanks collapsed)."""
    key_items = [k.strip() for k in key.split(",") if k.strip()]
    if key_items and all(len(k) == 1 and k.isascii() and k.isalpha() for k in key_items):
        raw = text.encode("utf-8", "replace")
        return [
            chr(raw[i]).upper()
            for i in range(len(raw))
            if _is_letter(raw[i]) and _boundary(raw, i) and not _starts_word(raw, i)
        ]
    if key_items and all(k.isascii() and k.isdigit() for k in key_items):
        raw = text.encode("utf-8", "replace")
        return [normalize_integer(raw[a:b].decode()) for a, b in _digit_runs(raw)]
    return [" ".join(part.split()).lower() for part in text.split(",") if part.strip()]


def extract_sequence(output: bytes, key: str) -> str:
    """Items after the last answer marker's colon, on its line, joined by commas."""
    visible = visible_text(output)
    marker = answer_marker(visible)
    if marker is None:
        return NOTHING
    window = _marker_window(visible, marker)
    colon = window.find(b":")
    body = window[colon + 1 :] if colon >= 0 else window[len(_WORD) :]
    items = sequence_items(body.decode("utf-8", "replace"), key)
    return ",".join(items) if items else NOTHING


def extract(case: EvalCase, output: str) -> str:
    """The answer the case's kind reads from `output` (NOTHING when there is none)."""
    raw = output.encode("utf-8", "surrogateescape")
    kind = case.answer_kind
    if kind is AnswerKind.MULTIPLE_CHOICE:
        return extract_choice(raw, len(case.choices))
    if kind is AnswerKind.LINE_SET:
        return extract_line_set(raw)
    if kind is AnswerKind.ORDERED_SEQUENCE:
        return extract_sequence(raw, case.answer)
    return extract_integer(raw)


# --- grading ---
# Grading an extracted answer against a case's key and aliases
# (docs/reference/eval.md §5).


def matches(kind: AnswerKind, picked: str, key: str) -> bool:
    """Whether `picked` is graded correct against one key."""
    if picked == NOTHING or not picked:
        return False
    if kind is AnswerKind.MULTIPLE_CHOICE:
        return bool(key) and picked[0].upper() == key[0].upper()
    if kind is AnswerKind.LINE_SET:
        return line_set_passes(picked, key)
    if kind is AnswerKind.ORDERED_SEQUENCE:
        want = sequence_items(key, key)
        return bool(want) and sequence_items(picked, key) == want
    return picked.isdigit() and normalize_integer(picked) == normalize_integer(key.strip())


def is_correct(case: EvalCase, picked: str) -> bool:
    return any(matches(case.answer_kind, picked, key) for key in (case.answer, *case.aliases))


@dataclass(frozen=True)
class Grade:
    picked: str
    correct: bool


def grade_output(case: EvalCase, output: str) -> Grade:
    picked = extract(case, output)
    return Grade(picked, is_correct(case, picked))
