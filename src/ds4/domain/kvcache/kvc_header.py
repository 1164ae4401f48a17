"""The 48-byte KVC header of a `<sha1>.kv` file (docs/reference/formats.md §9.2).

Layout (little-endian): "KVC", version 1, quant bits, save reason, extension flags,
reserved, u32 tokens, u32 hits, u32 ctx, u32 model tag, u64 created_at, u64 last_used,
u64 payload bytes. The model tag uses the 4 bytes the reference leaves reserved
(ADR 0006): 0 means "unknown model" and matches anything. Extension flag bit 3 says
the file ends with the integrity footer of docs/adr/0007-kv-file-integrity.md; a file
without it (the C engine's, or ds4's before ADR 0007) is listed but never loaded.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, replace
from enum import IntEnum, IntFlag

MAGIC = b"KVC"
VERSION = 1
HEADER_SIZE = 48
PREFIX_SIZE = HEADER_SIZE + 4  # header + u32 text length
_LAYOUT = struct.Struct("<3sBBBBBIIIIQQQ")
assert _LAYOUT.size == HEADER_SIZE


class SaveReason(IntEnum):
    UNKNOWN = 0
    COLD = 1
    CONTINUED = 2
    EVICT = 3
    SHUTDOWN = 4
    AGENT_SYSTEM = 5
    AGENT_SESSION = 6


class KvcFlags(IntFlag):
    NONE = 0
    KTM_TRAILER = 1  # tool-id -> DSML map follows the payload
    RESPONSES_VISIBLE = 2  # key is the Responses-visible transcript
    THINKING_VISIBLE = 4  # key is the thinking-visible transcript
    CHECKSUM = 8  # the integrity footer (ADR 0007) ends the file


@dataclass(frozen=True)
class KvcHeader:
    quant_bits: int
    reason: SaveReason
    flags: KvcFlags
    tokens: int
    hits: int
    ctx: int
    model_tag: int
    created_at: int
    last_used: int
    payload_bytes: int

    def encode(self) -> bytes:
        return _LAYOUT.pack(
            MAGIC,
            VERSION,
            self.quant_bits,
            int(self.reason),
            int(self.flags),
            0,
            self.tokens,
            self.hits,
            self.ctx,
            self.model_tag,
            self.created_at,
            self.last_used,
            self.payload_bytes,
        )

    @property
    def has_checksum(self) -> bool:
        """The file carries the integrity footer, so it can be verified and loaded."""
        return bool(self.flags & KvcFlags.CHECKSUM)

    def touched(self, now: int) -> KvcHeader:
        """The header after a successful load: one more hit, used now."""
        return replace(self, hits=min(self.hits + 1, 2**32 - 1), last_used=now)


def decode_header(data: bytes) -> KvcHeader | None:
    """The header, or None when the file is not one we may use (wrong magic/version,
    no tokens, quant bits other than 2 or 4)."""
    if len(data) < HEADER_SIZE:
        return None
    (
        magic,
        version,
        quant,
        reason,
        flags,
        _reserved,
        tokens,
        hits,
        ctx,
        model_tag,
        created,
        used,
        payload,
    ) = _LAYOUT.unpack_from(data)
    if magic != MAGIC or version != VERSION or tokens == 0 or quant not in (2, 4):
        return None
    return KvcHeader(
        quant_bits=quant,
        reason=SaveReason(reason) if reason <= SaveReason.AGENT_SESSION else SaveReason.UNKNOWN,
        flags=KvcFlags(flags & 15),
        tokens=tokens,
        hits=hits,
        ctx=ctx,
        model_tag=model_tag,
        created_at=created,
        last_used=used,
        payload_bytes=payload,
    )


def model_tag(identity: bytes) -> int:
    """A nonzero 32-bit tag for a model identity (e.g. its hyperparameters and tensor types)."""
    tag = int.from_bytes(hashlib.sha1(identity).digest()[:4], "little")
    return tag or 1


def cache_key_name(text: bytes) -> str:
    """The file name for a key text: lowercase hex SHA-1 plus `.kv`."""
    return hashlib.sha1(text).hexdigest() + ".kv"


def parse_cache_name(name: str) -> str | None:
    """The lowercase SHA-1 of a qualifying file name (40 hex digits + `.kv`), else None."""
    if len(name) != 43 or not name.endswith(".kv"):
        return None
    digest = name[:40].lower()
    return digest if all(c in "0123456789abcdef" for c in digest) else None
