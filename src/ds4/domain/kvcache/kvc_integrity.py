"""The integrity footer that ends every `.kv` file ds4 writes (docs/adr/0007-kv-file-integrity.md).

Layout (24 bytes, the last of the file, after the payload and any trailer sections):

    u8[3] "KVI", u8 version 1, u32 reserved 0,
    u8[8] body digest: XXH3-64 of u32 text_bytes ‖ text ‖ payload
    u8[8] meta digest: XXH3-64 of header[48] ‖ trailer sections ‖ footer[0:16]

Digests are xxhash's canonical (big-endian) bytes. The body (hundreds of MB) is hashed
once, when the file is written. The meta digest binds the header, the trailer sections
and the recorded body digest, so every byte of the file is covered, yet a header update
(hits, last use) or a new KTM trailer rehashes only a few hundred bytes, and a directory
listing verifies every header it uses without reading a payload.
"""

from __future__ import annotations

import struct

import xxhash

FOOTER_MAGIC = b"KVI"
FOOTER_VERSION = 1
FOOTER_SIZE = 24
FOOTER_START = FOOTER_MAGIC + bytes([FOOTER_VERSION])  # the first 4 bytes of every footer
_HEAD = struct.Struct("<3sBI8s")  # magic, version, reserved, body digest
_LAYOUT = struct.Struct("<3sBI8s8s")
assert _LAYOUT.size == FOOTER_SIZE


def body_digest(text: bytes, payload: bytes) -> bytes:
    """The digest of the key text and the payload (the text length keeps them apart)."""
    digest = xxhash.xxh3_64()
    digest.update(struct.pack("<I", len(text)))
    digest.update(text)
    digest.update(payload)
    return digest.digest()


def _meta_digest(header: bytes, sections: bytes, footer_head: bytes) -> bytes:
    digest = xxhash.xxh3_64()
    digest.update(header)
    digest.update(sections)
    digest.update(footer_head)
    return digest.digest()


def make_footer(header: bytes, sections: bytes, body: bytes) -> bytes:
    """The footer for a file with these raw header bytes, trailer sections and body digest."""
    head = _HEAD.pack(FOOTER_MAGIC, FOOTER_VERSION, 0, body)
    return head + _meta_digest(header, sections, head)


def check_footer(header: bytes, sections: bytes, footer: bytes) -> bytes | None:
    """The body digest the footer records, if the footer is well formed and its meta
    digest matches the header and sections as read; None otherwise."""
    if len(footer) != FOOTER_SIZE:
        return None
    magic, version, reserved, body, meta = _LAYOUT.unpack(footer)
    if magic != FOOTER_MAGIC or version != FOOTER_VERSION or reserved != 0:
        return None
    if meta != _meta_digest(header, sections, footer[: _HEAD.size]):
        return None
    return bytes(body)
