"""KVStore: a directory of `<sha1>.kv` checkpoint files (docs/reference/formats.md §9)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ds4.domain.kvcache.kv_file import KvcHeader
from ds4.domain.kvcache.policy import CacheEntry


@dataclass(frozen=True)
class KvFile:
    header: KvcHeader
    text: bytes  # the key
    payload: bytes  # the engine's DSV4 payload
    trailer: bytes  # sections after the payload (KTM), b"" if none


class KVStore(Protocol):
    """Checkpoint files, each checked before any of its bytes is handed out
    (docs/adr/0007-kv-file-integrity.md); a file that fails is set aside, never returned."""

    def entries(self) -> list[CacheEntry]:
        """Every usable file, freshly scanned, headers verified; files without a checksum
        are listed too (they count against the budget), for the policy to skip."""
        ...

    def read(self, sha: str) -> KvFile | None:
        """The whole file, verified; None if it vanished, failed its checks, or cannot be
        verified (no checksum)."""
        ...

    def read_key(self, sha: str) -> bytes | None:
        """The key text, if it still hashes to the file's name."""
        ...

    def read_trailer(self, sha: str) -> bytes:
        """The verified sections after the payload (b"" if none, or the file vanished,
        failed its checks or cannot be verified)."""
        ...

    def write(self, header: KvcHeader, text: bytes, payload: bytes, trailer: bytes) -> str:
        """Atomically (temp + fsync + rename) write `<sha1(text)>.kv` with its checksum;
        return the sha."""
        ...

    def update_header(self, sha: str, header: KvcHeader) -> None:
        """Rewrite the header in place (keeping the checksum valid); a file that cannot be
        verified or is linked elsewhere too is left alone."""
        ...

    def replace_trailer(self, sha: str, header: KvcHeader, trailer: bytes) -> None:
        """Replace the sections after the payload and the header, as update_header does."""
        ...

    def delete(self, sha: str) -> None: ...

    @property
    def used_bytes(self) -> int: ...
