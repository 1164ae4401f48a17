"""Saved sessions' names and listings (docs/agent.md "Sessions").

A session's id is the SHA-1 of its title (the first user prompt, whitespace runs
collapsed) followed by its creation time as u64 little-endian Unix seconds: stable
across re-saves, so a save overwrites the same session.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ds4.domain.errors import Ds4Error

TITLE_COLUMNS = 72
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class SessionRecord:
    """One saved session: what /list shows and where its KV file is."""

    id: str
    title: str
    created_at: int
    last_used: int
    tokens: int
    ctx: int
    model_tag: int
    quant_bits: int
    kv_sha: str  # the KV file (named by the SHA-1 of its rendered text)
    payload_bytes: int  # 0: stripped (rebuilt from the text on /switch)

    @property
    def stripped(self) -> bool:
        return self.payload_bytes == 0


def normalize_title(text: str) -> str:
    return " ".join(text.split())


def session_id(title: str, created_at: int) -> str:
    return hashlib.sha1(title.encode("utf-8") + struct.pack("<Q", created_at)).hexdigest()


def resolve_prefix(prefix: str, ids: Sequence[str]) -> str:
    p = prefix.strip().lower()
    if not 1 <= len(p) <= 40 or not set(p) <= _HEX:
        raise Ds4Error("invalid session SHA prefix")
    hits = [i for i in ids if i.startswith(p)]
    if not hits:
        raise Ds4Error(f"no saved session matches {prefix.strip()}")
    if len(hits) > 1:
        raise Ds4Error(f"session prefix {prefix.strip()} is ambiguous")
    return hits[0]


def age_text(seconds: int) -> str:
    s = max(0, seconds)
    if s < 60:
        return f"{s}s ago"
    if s < 3600:
        return f"{s // 60}m ago"
    if s < 86400:
        return f"{s // 3600}h ago"
    return f"{s // 86400}d ago"


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 3)] + "..."


def listing_text(records: Sequence[SessionRecord], now: int, sizes: dict[str, int]) -> str:
    """`/list`: newest first; `sizes` are the KV files' bytes by session id."""
    if not records:
        return "no saved sessions\n"
    rows = []
    for r in records:
        mb = sizes.get(r.id, 0) / 1e6
        stripped = ", stripped" if r.stripped else ""
        rows.append(f"{r.id[:8]} > {clip(r.title, TITLE_COLUMNS)}")
        rows.append(
            f"         > {age_text(now - r.last_used)}, {r.tokens} tokens, {mb:.2f} MB{stripped}"
        )
    rows.append("")
    rows.append(
        "Use /switch <id> to select a session, /del <id> to remove, /strip <id> to strip KV cache."
    )
    return "\n".join(rows) + "\n"
