"""Per-code-point classes the official pre-tokenizer asks about (Unicode 16.0.0).

The tables come from tools/gen_unicode_classes.py; the native tokenizer is built
from the same generated data, so both paths classify every code point alike.
"""

from __future__ import annotations

from ds4.adapters.tokenizer.unicode_class_ranges import RANGE_CLASSES, RANGE_STARTS

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
