"""The GPT-2 byte-level alphabet: every byte is one printable code point
(docs/reference/chat-and-dsml.md §1.3)."""

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
