"""The official DeepSeek V4 pre-tokenizer, written as the three Split regexes it declares.

tokenizer.json: Sequence[Split(\\p{N}{1,3}), Split(CJK run), Split(main regex)], each with
behaviour Isolated (matches and the gaps between them both become pieces), then
ByteLevel without its own regex. The stdlib `re` has no \\p{..}, so the classes are
spelled out from the generated Unicode 16.0.0 tables; `\\s` is the White_Space
property there (Python's own `\\s` would add U+001C-U+001F).

This is the reference the native scanner (native/tokenizer) is tested against.
"""

from __future__ import annotations

import re

from ds4.adapters.tokenizer.char_classes import (
    LETTER_MARK,
    NUMBER,
    PUNCT_SYMBOL,
    WHITE_SPACE,
    code_points_of_class,
)


def _class_body(cls: int) -> str:
    parts = []
    for first, last in code_points_of_class(cls):
        parts.append(f"\\U{first:08x}" if first == last else f"\\U{first:08x}-\\U{last:08x}")
    return "".join(parts)


_N = _class_body(NUMBER)
_LM = _class_body(LETTER_MARK)
_PS = _class_body(PUNCT_SYMBOL)
_WS = _class_body(WHITE_SPACE)

DIGITS = re.compile(f"[{_N}]{{1,3}}")
CJK = re.compile("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+")
# The official prefix class is [^\r\n\p{L}\p{P}\p{S}] (marks allowed). Excluding marks
# too gives the same matches: a mark that could open the match is itself in [\p{L}\p{M}]+,
# and the greedy run ends at the same place either way.
MAIN = re.compile(
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"""
    f"|[^\\r\\n{_LM}{_PS}]?[{_LM}]+"
    f"| ?[{_PS}]+[\\r\\n]*"
    f"|[{_WS}]*[\\r\\n]+"
    f"|[{_WS}]+(?![^{_WS}])"
    f"|[{_WS}]+"
)

SPLITS = (DIGITS, CJK, MAIN)


def split_isolated(pattern: re.Pattern[str], pieces: list[str]) -> list[str]:
    """Split each piece at every match; matches and the gaps between them are kept."""
    out: list[str] = []
    for piece in pieces:
        pos = 0
        for match in pattern.finditer(piece):
            if match.start() > pos:
                out.append(piece[pos : match.start()])
            out.append(match.group())
            pos = match.end()
        if pos < len(piece):
            out.append(piece[pos:])
    return out


def pretokenize(text: str) -> list[str]:
    """The pieces BPE runs on, as text (before the byte-level mapping)."""
    pieces = [text] if text else []
    for pattern in SPLITS:
        pieces = split_isolated(pattern, pieces)
    return pieces
