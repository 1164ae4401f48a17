"""Text to the pieces BPE merges: added-token split, the official pre-tokenizer, byte-level symbols.

encode runs the three stages in that order: added tokens are found in raw text,
the text between them is split by the pre-tokenizer, and each piece is mapped
byte by byte onto the byte-level alphabet BPE merges over.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ds4.adapters.tokenizer.unicode_class_ranges import RANGE_CLASSES, RANGE_STARTS
from ds4.adapters.tokenizer.vocabulary import AddedToken
from ds4.domain.tokenizer import BYTE_TO_CHAR

# --- Added tokens ---------------------------------------------------------------
# Found in raw text the way HF `tokenizers` does for this tokenizer.json. Two passes,
# each leftmost-longest: `early` tokens over the whole text, then the other added
# tokens inside the gaps between early matches. Text between matches goes on to
# pre-tokenization and BPE.

Segment = str | int  # plain text, or the id of a matched added token


def _alternation(tokens: Iterable[AddedToken]) -> tuple[re.Pattern[str] | None, dict[str, int]]:
    ids = {t.content: t.id for t in tokens}
    if not ids:
        return None, ids
    # Longest first: at the leftmost matching position `re` takes the first alternative.
    ordered = sorted(ids, key=len, reverse=True)
    return re.compile("|".join(re.escape(s) for s in ordered)), ids


class AddedTokenMatcher:
    def __init__(self, added: Iterable[AddedToken]) -> None:
        tokens = list(added)
        self._passes = [
            _alternation(t for t in tokens if t.early),
            _alternation(t for t in tokens if not t.early),
        ]

    def split(self, text: str) -> list[Segment]:
        segments: list[Segment] = [text] if text else []
        for pattern, ids in self._passes:
            if pattern is None:
                continue
            out: list[Segment] = []
            for seg in segments:
                if isinstance(seg, int):
                    out.append(seg)
                    continue
                pos = 0
                for match in pattern.finditer(seg):
                    if match.start() > pos:
                        out.append(seg[pos : match.start()])
                    out.append(ids[match.group()])
                    pos = match.end()
                if pos < len(seg):
                    out.append(seg[pos:])
            segments = out
        return segments


# --- Character classes ------------------------------------------------------------
# Per-code-point classes the official pre-tokenizer asks about (Unicode 16.0.0). The
# tables come from tools/gen_unicode_classes.py; the native tokenizer is built from
# the same generated data, so both paths classify every code point alike.

OTHER = 0
LETTER_MARK = 1  # \p{L} or \p{M}
NUMBER = 2  # \p{N}
PUNCT_SYMBOL = 3  # \p{P} or \p{S}
WHITE_SPACE = 4  # \s (the White_Space property)

MAX_CODE_POINT = 0x110000

# The CJK split of the pre-tokenizer: U+4E00-U+9FA5, U+3040-U+309F, U+30A0-U+30FF.
CJK_RANGES = ((0x4E00, 0x9FA5), (0x3040, 0x309F), (0x30A0, 0x30FF))


def _expand() -> bytes:
    table = bytearray(MAX_CODE_POINT)
    ends = (*RANGE_STARTS[1:], MAX_CODE_POINT)
    for start, end, cls in zip(RANGE_STARTS, ends, RANGE_CLASSES, strict=True):
        table[start:end] = bytes([int(cls)]) * (end - start)
    return bytes(table)


CLASS_OF_CODE_POINT: bytes = _expand()


def char_class(cp: int) -> int:
    return CLASS_OF_CODE_POINT[cp]


def code_points_of_class(cls: int) -> list[tuple[int, int]]:
    """Inclusive (first, last) ranges of every code point in class `cls`."""
    ends = (*RANGE_STARTS[1:], MAX_CODE_POINT)
    return [
        (start, end - 1)
        for start, end, c in zip(RANGE_STARTS, ends, RANGE_CLASSES, strict=True)
        if int(c) == cls
    ]


# --- The pre-tokenizer ------------------------------------------------------------
# The official DeepSeek V4 pre-tokenizer, written as the three Split regexes it
# declares. tokenizer.json: Sequence[Split(\p{N}{1,3}), Split(CJK run), Split(main
# regex)], each with behaviour Isolated (matches and the gaps between them both become
# pieces), then ByteLevel without its own regex. The stdlib `re` has no \p{..}, so the
# classes are spelled out from the generated Unicode 16.0.0 tables; `\s` is the
# White_Space property there (Python's own `\s` would add U+001C-U+001F).
# This is the reference the native scanner (native/tokenizer) is tested against.


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


# --- Byte-level symbols -----------------------------------------------------------
# Bytes <-> byte-level symbols, over the alphabet in domain/tokenizer
# (docs/reference/chat-and-dsml.md §1.3).

CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in enumerate(BYTE_TO_CHAR)}

# str.translate table over latin-1 decoded text: byte value -> its symbol.
_LATIN1_TO_SYMBOL = {b: BYTE_TO_CHAR[b] for b in range(256)}


def to_symbols(raw: bytes) -> str:
    """Map each byte to its byte-level symbol."""
    return raw.decode("latin-1").translate(_LATIN1_TO_SYMBOL)


def from_symbols(symbols: str) -> bytes:
    """Inverse of `to_symbols`; code points outside the alphabet are dropped
    (docs/reference/chat-and-dsml.md §1.5)."""
    return bytes(CHAR_TO_BYTE[c] for c in symbols if c in CHAR_TO_BYTE)
