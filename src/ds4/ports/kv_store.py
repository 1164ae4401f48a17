"""KVStore: a directory of `<sha1>.kv` checkpoint files (formats.md §6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ds4.domain.kvcache.kvc_header import KvcHeader
from ds4.domain.kvcache.policy import CacheEntry


@dataclass(frozen=True)
class KvFile:
    header: KvcHeader
    text: bytes  # the key
    payload: bytes  # the engine's DSV4 payload
    trailer: bytes  # sections after the payload (KTM), b"" if none


class KVStore(Protocol):
    def entries(self) -> list[CacheEntry]:
        """Every usable file, freshly scanned; unusable files of ours are removed."""
        ...

    def read(self, sha: str) -> KvFile | None:
        """The whole file, or None if it vanished or no longer checks out."""
        ...

    def read_key(self, sha: str) -> bytes | None: ...

    def read_trailer(self, sha: str) -> bytes:
        """The sections after the payload (b"" if none or the file vanished)."""
        ...

    def write(self, header: KvcHeader, text: bytes, payload: bytes, trailer: bytes) -> str:
        """Atomically (temp + fsync + rename) write `<sha1(text)>.kv`; return the sha."""
        ...

    def update_header(self, sha: str, header: KvcHeader) -> None: ...

    def replace_trailer(self, sha: str, header: KvcHeader, trailer: bytes) -> None: ...

    def delete(self, sha: str) -> None: ...

    @property
    def used_bytes(self) -> int: ...
