"""Bytes <-> byte-level symbols, over the alphabet in domain/tokenizer
(docs/reference/chat-and-dsml.md §1.3)."""

from __future__ import annotations

from ds4.domain.tokenizer import BYTE_TO_CHAR

__all__ = ["BYTE_TO_CHAR", "CHAR_TO_BYTE", "from_symbols", "to_symbols"]

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
