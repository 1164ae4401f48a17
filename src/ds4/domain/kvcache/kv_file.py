"""The `<sha1>.kv` file (docs/reference/formats.md §9): its 48-byte KVC header, the model
identity behind the header's model tag (ADR 0006), and the integrity footer that ends
every file ds4 writes (docs/adr/0007-kv-file-integrity.md).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import IntEnum, IntFlag

import xxhash

from ds4.domain.gguf.records import MetaValue, TensorInfo
from ds4.domain.model.hparams import DeepSeekV4HParams

# --- kvc header ---
# The 48-byte KVC header of a `<sha1>.kv` file (docs/reference/formats.md §9.2).
#
# Layout (little-endian): "KVC", version 1, quant bits, save reason, extension flags,
# reserved, u32 tokens, u32 hits, u32 ctx, u32 model tag, u64 created_at, u64 last_used,
# u64 payload bytes. The model tag uses the 4 bytes the reference leaves reserved
# (ADR 0006): 0 means "unknown model" and matches anything. Extension flag bit 3 says
# the file ends with the integrity footer of docs/adr/0007-kv-file-integrity.md; a file
# without it (the C engine's, or ds4's before ADR 0007) is listed but never loaded.

MAGIC = b"KVC"
VERSION = 1
HEADER_SIZE = 48
PREFIX_SIZE = HEADER_SIZE + 4  # header + u32 text length
_HEADER_LAYOUT = struct.Struct("<3sBBBBBIIIIQQQ")
assert _HEADER_LAYOUT.size == HEADER_SIZE


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
        return _HEADER_LAYOUT.pack(
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
    ) = _HEADER_LAYOUT.unpack_from(data)
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


# --- kvc integrity ---
# The integrity footer that ends every `.kv` file ds4 writes (docs/adr/0007-kv-file-integrity.md).
#
# Layout (24 bytes, the last of the file, after the payload and any trailer sections):
#
#     u8[3] "KVI", u8 version 1, u32 reserved 0,
#     u8[8] body digest: XXH3-64 of u32 text_bytes ‖ text ‖ payload
#     u8[8] meta digest: XXH3-64 of header[48] ‖ trailer sections ‖ footer[0:16]
#
# Digests are xxhash's canonical (big-endian) bytes. The body (hundreds of MB) is hashed
# once, when the file is written. The meta digest binds the header, the trailer sections
# and the recorded body digest, so every byte of the file is covered, yet a header update
# (hits, last use) or a new KTM trailer rehashes only a few hundred bytes, and a directory
# listing verifies every header it uses without reading a payload.

FOOTER_MAGIC = b"KVI"
FOOTER_VERSION = 1
FOOTER_SIZE = 24
FOOTER_START = FOOTER_MAGIC + bytes([FOOTER_VERSION])  # the first 4 bytes of every footer
_HEAD = struct.Struct("<3sBI8s")  # magic, version, reserved, body digest
_FOOTER_LAYOUT = struct.Struct("<3sBI8s8s")
assert _FOOTER_LAYOUT.size == FOOTER_SIZE


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
    magic, version, reserved, body, meta = _FOOTER_LAYOUT.unpack(footer)
    if magic != FOOTER_MAGIC or version != FOOTER_VERSION or reserved != 0:
        return None
    if meta != _meta_digest(header, sections, footer[: _HEAD.size]):
        return None
    return bytes(body)


# --- model identity ---
# The model identity behind the KVC header's model tag (ADR 0006).
#
# Checkpoints are only valid for the weights that wrote them. The identity hashes what
# distinguishes one model file from another without reading its weights: every
# metadata entry except the tokenizer tables (shapes, hyperparameters, converter
# provenance such as the seed of a random tiny model), and each tensor's name, shape
# and type. Two quantizations of one model differ (tensor types), as they should:
# their KV states are not interchangeable bit for bit.

_SKIPPED_PREFIX = "tokenizer."


def model_identity(
    hparams: DeepSeekV4HParams,
    metadata: Mapping[str, MetaValue] | None = None,
    tensors: Iterable[TensorInfo] = (),
) -> bytes:
    digest = hashlib.sha1(repr(hparams).encode())
    for key in sorted(metadata or {}):
        if not key.startswith(_SKIPPED_PREFIX):
            digest.update(f"\n{key}={(metadata or {})[key].value!r}".encode())
    for info in sorted(tensors, key=lambda t: t.name):
        digest.update(f"\n{info.name}:{info.dims}:{info.ggml_type.name}".encode())
    return digest.digest()


def model_tag_for(
    hparams: DeepSeekV4HParams,
    metadata: Mapping[str, MetaValue] | None = None,
    tensors: Iterable[TensorInfo] = (),
) -> int:
    """The nonzero 32-bit tag stored in the header for this model."""
    return model_tag(model_identity(hparams, metadata, tensors))
