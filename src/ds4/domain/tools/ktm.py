"""KTM trailer bytes: tool id -> exact sampled DSML block (docs/reference/formats.md §9.4,
docs/reference/chat-and-dsml.md §4.4).

u8[3] "KTM" | u8 version=1 | u32 LE count | count x (u32 id_len, u32 dsml_len, id, dsml)
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from ds4.domain.dsml.parser import BlockStart, BlockStatus, parse_block
from ds4.domain.dsml.syntax import SPELLINGS

KTM_MAGIC = b"KTM"
KTM_VERSION = 1
MAX_ID_BYTES = 256
MAX_DSML_BYTES = 512 * 1024 * 1024
_HEADER = struct.Struct("<3sBI")
_ENTRY = struct.Struct("<II")


def encode_ktm(entries: Sequence[tuple[str, str]]) -> bytes:
    """The trailer for (id, dsml) pairs; b"" when there are none (flag bit stays clear)."""
    if not entries:
        return b""
    parts = [_HEADER.pack(KTM_MAGIC, KTM_VERSION, len(entries))]
    for tool_id, dsml in entries:
        id_bytes, dsml_bytes = tool_id.encode(), dsml.encode()
        parts += (_ENTRY.pack(len(id_bytes), len(dsml_bytes)), id_bytes, dsml_bytes)
    return b"".join(parts)


def ktm_size(entries: Sequence[tuple[str, str]]) -> int:
    """Exactly len(encode_ktm(entries)), for the disk budget check."""
    if not entries:
        return 0
    return _HEADER.size + sum(_ENTRY.size + len(i.encode()) + len(d.encode()) for i, d in entries)


def decode_ktm(data: bytes, *, max_count: int) -> list[tuple[str, str]]:
    """Entries up to the first bad or short one; [] for a bad header or a count over
    `max_count` (4 x the memory's id limit)."""
    if len(data) < _HEADER.size:
        return []
    magic, version, count = _HEADER.unpack_from(data)
    if magic != KTM_MAGIC or version != KTM_VERSION or count > max_count:
        return []
    entries: list[tuple[str, str]] = []
    pos = _HEADER.size
    for _ in range(count):
        if pos + _ENTRY.size > len(data):
            break
        id_len, dsml_len = _ENTRY.unpack_from(data, pos)
        pos += _ENTRY.size
        if not (1 <= id_len <= MAX_ID_BYTES and 1 <= dsml_len <= MAX_DSML_BYTES):
            break
        if pos + id_len + dsml_len > len(data):
            break
        try:
            tool_id = data[pos : pos + id_len].decode()
            dsml = data[pos + id_len : pos + id_len + dsml_len].decode()
        except UnicodeDecodeError:
            break
        entries.append((tool_id, dsml))
        pos += id_len + dsml_len
    return entries


def dsml_blocks(text: str) -> list[str]:
    """Every complete DSML block in `text`, in order, each from its leading blank line
    (when present) through its close tag — the same bytes the parser captures."""
    blocks: list[str] = []
    pos = 0
    while True:
        found = [(at, s) for s in SPELLINGS if (at := text.find(s.block_open, pos)) >= 0]
        if not found:
            return blocks
        at, spelling = min(found, key=lambda item: item[0])
        start = at - 2 if at - 2 >= pos and text[at - 2 : at] == "\n\n" else at
        block = BlockStart(start, at + len(spelling.block_open), spelling)
        parsed = parse_block(text, block)
        if parsed.status is BlockStatus.COMPLETE:
            blocks.append(text[start : parsed.end])
            pos = parsed.end
        else:
            pos = block.tag_end
