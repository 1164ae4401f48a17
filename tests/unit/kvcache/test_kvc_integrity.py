"""The integrity footer (docs/adr/0007-kv-file-integrity.md): every bit it covers counts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4.domain.kvcache.kv_file import (
    FOOTER_SIZE,
    FOOTER_START,
    KvcFlags,
    KvcHeader,
    SaveReason,
    body_digest,
    check_footer,
    make_footer,
)

HEADER = KvcHeader(2, SaveReason.COLD, KvcFlags.CHECKSUM, 9, 0, 4096, 7, 1, 1, 5).encode()
SECTIONS = b"KTM\x01\x00\x00\x00\x00"
BODY = body_digest(b"key", b"payload")


def flipped(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def test_a_footer_checks_out_and_records_the_body_digest() -> None:
    footer = make_footer(HEADER, SECTIONS, BODY)
    assert len(footer) == FOOTER_SIZE and footer.startswith(FOOTER_START)
    assert check_footer(HEADER, SECTIONS, footer) == BODY


@pytest.mark.parametrize("part", ["header", "sections", "footer"])
def test_every_flipped_bit_of_header_sections_or_footer_fails(part: str) -> None:
    footer = make_footer(HEADER, SECTIONS, BODY)
    parts = {"header": HEADER, "sections": SECTIONS, "footer": footer}
    for bit in range(8 * len(parts[part])):
        damaged = {**parts, part: flipped(parts[part], bit)}
        assert check_footer(damaged["header"], damaged["sections"], damaged["footer"]) is None


def test_the_body_digest_covers_every_bit_and_the_text_payload_boundary() -> None:
    text, payload = b"<sys>hello", bytes(range(64))
    digest = body_digest(text, payload)
    for bit in range(8 * len(text)):
        assert body_digest(flipped(text, bit), payload) != digest
    for bit in range(8 * len(payload)):
        assert body_digest(text, flipped(payload, bit)) != digest
    assert body_digest(b"ab", b"c") != body_digest(b"a", b"bc")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=96), st.binary(max_size=96), st.binary(max_size=96))
def test_any_bytes_as_a_footer_fail_unless_made_for_them(
    header: bytes, sections: bytes, footer: bytes
) -> None:
    assert check_footer(header, sections, footer) is None
    assert check_footer(header, sections, make_footer(header, sections, BODY)) == BODY
