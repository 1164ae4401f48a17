"""Reading one `.kv` file through an open descriptor, verified before any byte is used.

`read_layout` reads the fixed prefix and the tail (trailer sections + integrity footer)
and checks the footer's meta digest, so the header fields and the KTM trailer are known
good; `read_body` then reads the key text and the payload and checks the body digest
(docs/adr/0007-kv-file-integrity.md). A file that fails is `Damaged`, with the reason
for the log line. A file without the footer (the C engine's, or ds4's before ADR 0007)
gets a layout with no digest: it may be listed, never loaded.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from ds4.domain.kvcache.kv_file import (
    FOOTER_SIZE,
    FOOTER_START,
    HEADER_SIZE,
    PREFIX_SIZE,
    KvcHeader,
    body_digest,
    check_footer,
    decode_header,
)

# The trailer sections hold the KTM map, whose DSML blocks are copied from the key text,
# which the context bounds to a few MB; a larger tail means a damaged size field, and is
# not read into memory.
MAX_SECTIONS_BYTES = 64 << 20
# Linux returns at most this much from one read(2); larger payloads take several.
_MAX_READ = 0x7FFFF000


@dataclass(frozen=True)
class Damaged:
    why: str


@dataclass(frozen=True)
class FileLayout:
    header: KvcHeader
    header_raw: bytes  # the 48 bytes as stored
    text_bytes: int
    size: int  # of the whole file
    sections: bytes  # trailer sections between the payload and the footer (b"" if none)
    body: bytes | None  # the recorded body digest; None for a file without the footer

    @property
    def payload_start(self) -> int:
        return PREFIX_SIZE + self.text_bytes

    @property
    def payload_end(self) -> int:
        return self.payload_start + self.header.payload_bytes


def read_exact(fd: int, count: int, offset: int) -> bytes:
    """`count` bytes at `offset`, or fewer only where the file ends."""
    parts = []
    while count > 0:
        part = os.pread(fd, min(count, _MAX_READ), offset)
        if not part:
            break
        parts.append(part)
        count -= len(part)
        offset += len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_layout(fd: int, size: int) -> FileLayout | Damaged:
    """The verified header, key length and trailer sections of the file open on `fd`."""
    prefix = read_exact(fd, PREFIX_SIZE, 0)
    header = decode_header(prefix)
    if header is None or len(prefix) < PREFIX_SIZE:
        return Damaged("not a usable KVC version 1 header")
    (text_bytes,) = struct.unpack_from("<I", prefix, HEADER_SIZE)
    end = PREFIX_SIZE + text_bytes + header.payload_bytes
    raw = prefix[:HEADER_SIZE]
    if not header.has_checksum:
        if size < end:
            return Damaged("shorter than its header says")
        if size >= end + FOOTER_SIZE and read_exact(fd, 4, size - FOOTER_SIZE) == FOOTER_START:
            return Damaged("a footer is present but the header's checksum flag is clear")
        return FileLayout(header, raw, text_bytes, size, b"", None)
    if size < end + FOOTER_SIZE:
        return Damaged("shorter than its header says")
    if size - end - FOOTER_SIZE > MAX_SECTIONS_BYTES:
        return Damaged("trailer sections larger than any key could need")
    tail = read_exact(fd, size - end, end)
    if len(tail) != size - end:
        return Damaged("changed while being read")
    sections, footer = tail[:-FOOTER_SIZE], tail[-FOOTER_SIZE:]
    body = check_footer(raw, sections, footer)
    if body is None:
        return Damaged("checksum mismatch in the header, trailer or footer")
    return FileLayout(header, raw, text_bytes, size, sections, body)


def read_body(fd: int, layout: FileLayout) -> tuple[bytes, bytes] | Damaged:
    """The key text and the payload, checked against the body digest of the footer."""
    if layout.body is None:
        return Damaged("written without a checksum")
    text = read_exact(fd, layout.text_bytes, PREFIX_SIZE)
    payload = read_exact(fd, layout.header.payload_bytes, layout.payload_start)
    if len(text) != layout.text_bytes or len(payload) != layout.header.payload_bytes:
        return Damaged("changed while being read")
    if body_digest(text, payload) != layout.body:
        return Damaged("checksum mismatch in the key text or payload")
    return text, payload
