"""A KVStore in a dict: the disk KV cache's file semantics without a directory."""

from __future__ import annotations

import hashlib
from dataclasses import replace

from ds4.domain.kvcache.kv_file import PREFIX_SIZE, KvcHeader
from ds4.domain.kvcache.policy import CacheEntry
from ds4.ports.kv_store import KvFile


class MemoryKVStore:
    def __init__(self) -> None:
        self.files: dict[str, KvFile] = {}

    def entries(self) -> list[CacheEntry]:
        return [
            CacheEntry(sha, f.header, len(f.text), self._size(f))
            for sha, f in sorted(self.files.items())
        ]

    @staticmethod
    def _size(f: KvFile) -> int:
        return PREFIX_SIZE + len(f.text) + len(f.payload) + len(f.trailer)

    @property
    def used_bytes(self) -> int:
        return sum(self._size(f) for f in self.files.values())

    def read(self, sha: str) -> KvFile | None:
        return self.files.get(sha)

    def read_key(self, sha: str) -> bytes | None:
        f = self.files.get(sha)
        return None if f is None else f.text

    def read_trailer(self, sha: str) -> bytes:
        f = self.files.get(sha)
        return b"" if f is None else f.trailer

    def write(self, header: KvcHeader, text: bytes, payload: bytes, trailer: bytes) -> str:
        sha = hashlib.sha1(text).hexdigest()
        self.files[sha] = KvFile(header, text, payload, trailer)
        return sha

    def update_header(self, sha: str, header: KvcHeader) -> None:
        if sha in self.files:
            self.files[sha] = replace(self.files[sha], header=header)

    def replace_trailer(self, sha: str, header: KvcHeader, trailer: bytes) -> None:
        if sha in self.files:
            self.files[sha] = replace(self.files[sha], header=header, trailer=trailer)

    def delete(self, sha: str) -> None:
        self.files.pop(sha, None)
