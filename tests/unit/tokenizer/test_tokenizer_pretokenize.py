"""The official pre-tokenizer: worked examples, native == reference, class tables."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4.adapters.tokenizer.bpe import native_char_class, native_pretokenize
from ds4.adapters.tokenizer.pretokenize import (
    CLASS_OF_CODE_POINT,
    LETTER_MARK,
    NUMBER,
    OTHER,
    PUNCT_SYMBOL,
    WHITE_SPACE,
    pretokenize,
)

EXAMPLES = {
    "Hello world!": ["Hello", " world", "!"],
    "    int x = 12345;\n\n": ["   ", " int", " x", " =", " ", "123", "45", ";\n\n"],
    "foo.\n\n bar": ["foo", ".\n\n", " bar"],
    "x  \n\n  y": ["x", "  \n\n", " ", " y"],
    # Official behaviour where ds4's byte splitter differs (docs/reference/chat-and-dsml.md §1.4).
    "a你好": ["a", "你好"],
    " 你好": [" ", "你好"],
    "»\n\n": ["»\n\n"],
    ".»": [".»"],
    " ٣": [" ", "٣"],
    "\u00a0\u00a0x": ["\u00a0", "\u00a0x"],
    # A mark can open a letter run; ZWJ matches nothing and is its own gap piece.
    "e\u0301\u0301": ["e\u0301\u0301"],
    "👨\u200d👩": ["👨", "\u200d", "👩"],
    "ゲーム・データ": ["ゲーム", "・", "データ"],
    "1234567": ["123", "456", "7"],
    "  ": ["  "],
    "\r\n\r\n x": ["\r\n\r\n", " x"],
    "'s": ["'s"],
    " !!\n": [" !!\n"],
}


@pytest.mark.parametrize(("text", "expected"), EXAMPLES.items())
def test_examples(text: str, expected: list[str]) -> None:
    assert pretokenize(text) == expected
    assert native_pretokenize(text) == expected


LETTERS_ETC = [*"aZ09 \t\n\r.,!?<>'\"-_", "é", "\u0301", "你", "あ", "ア", "゠", "・", "٣", "½"]
SPACES_ETC = ["«", "»", "\u00a0", "\u3000", "\u2028", "\u200d", "\x0b", "\x1c", "😀", "한"]
ALPHABET = st.sampled_from([*LETTERS_ETC, *SPACES_ETC, "\U000e0001"])


@settings(max_examples=400, deadline=None)
@given(st.lists(ALPHABET, max_size=50).map("".join))
def test_native_scanner_equals_reference_regex(text: str) -> None:
    pieces = pretokenize(text)
    assert "".join(pieces) == text
    assert native_pretokenize(text) == pieces


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_native_scanner_equals_reference_on_any_text(text: str) -> None:
    text = text.encode("utf-8", "replace").decode("utf-8")  # no lone surrogates
    assert native_pretokenize(text) == pretokenize(text)


def test_native_class_table_equals_python_table() -> None:
    mismatches = [cp for cp in range(0x110000) if native_char_class(cp) != CLASS_OF_CODE_POINT[cp]]
    assert mismatches == []


def test_class_table_agrees_with_stdlib_unicodedata_where_it_is_assigned() -> None:
    # Python 3.11 ships Unicode 14.0; our table is 16.0, which only adds characters.
    major = {"L": LETTER_MARK, "M": LETTER_MARK, "N": NUMBER, "P": PUNCT_SYMBOL, "S": PUNCT_SYMBOL}
    white = {*range(9, 14), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B)}
    white |= {0x2028, 0x2029, 0x202F, 0x205F, 0x3000}
    bad = []
    for cp in range(0x110000):
        cat = unicodedata.category(chr(cp))
        if cat == "Cn":
            continue
        want = WHITE_SPACE if cp in white else major.get(cat[0], OTHER)
        if CLASS_OF_CODE_POINT[cp] != want:
            bad.append(cp)
    assert bad == []
