"""The GPT-2 byte-level alphabet: every byte is one printable code point (spec §3.2)."""

from __future__ import annotations


def _byte_to_char() -> tuple[str, ...]:
    kept = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars: dict[int, str] = {b: chr(b) for b in kept}
    shifted = 0x100
    for b in range(256):
        if b not in chars:
            chars[b] = chr(shifted)
            shifted += 1
    return tuple(chars[b] for b in range(256))


BYTE_TO_CHAR: tuple[str, ...] = _byte_to_char()
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in enumerate(BYTE_TO_CHAR)}

# str.translate table over latin-1 decoded text: byte value -> its symbol.
_LATIN1_TO_SYMBOL = {b: BYTE_TO_CHAR[b] for b in range(256)}


def to_symbols(raw: bytes) -> str:
    """Map each byte to its byte-level symbol."""
    return raw.decode("latin-1").translate(_LATIN1_TO_SYMBOL)


def from_symbols(symbols: str) -> bytes:
    """Inverse of `to_symbols`; code points outside the alphabet are dropped (spec §5)."""
    return bytes(CHAR_TO_BYTE[c] for c in symbols if c in CHAR_TO_BYTE)
