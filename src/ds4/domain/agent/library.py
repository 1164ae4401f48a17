"""Saved sessions: KV files (the rendered transcript as key, the engine payload) plus
one JSON record each (docs/agent.md "Sessions"), and the system prompt's KV file.

Files of another model (tag) are never listed or loaded. A re-save under the same id
replaces the record and removes the old KV file once nothing names it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace

from ds4.domain.agent.session_meta import SessionRecord, resolve_prefix
from ds4.domain.errors import Ds4Error
from ds4.domain.kvcache.kv_file import KvcFlags, KvcHeader, SaveReason
from ds4.ports.agent import SessionIndex
from ds4.ports.kv_store import KVStore


@dataclass(frozen=True)
class LoadedSession:
    record: SessionRecord
    text: str  # the rendered transcript
    payload: bytes  # b"" when stripped


class SessionLibrary:
    def __init__(
        self, kv: KVStore, index: SessionIndex, *, model_tag: int, quant_bits: int, ctx: int
    ) -> None:
        self._kv = kv
        self._index = index
        self.model_tag = model_tag
        self.quant_bits = quant_bits
        self.ctx = ctx

    def _header(
        self, reason: SaveReason, tokens: int, payload: int, created: int, now: int
    ) -> KvcHeader:
        return KvcHeader(
            quant_bits=self.quant_bits,
            reason=reason,
            flags=KvcFlags.NONE,
            tokens=tokens,
            hits=0,
            ctx=self.ctx,
            model_tag=self.model_tag,
            created_at=created,
            last_used=now,
            payload_bytes=payload,
        )

    # ---- the system prompt ---------------------------------------------------

    def load_system(self, text: str) -> bytes | None:
        """The payload saved for exactly this system text and model, if any."""
        sha = hashlib.sha1(text.encode("utf-8")).hexdigest()
        found = self._kv.read(sha)
        if found is None or found.text != text.encode("utf-8"):
            return None
        h = found.header
        if h.model_tag != self.model_tag or h.quant_bits != self.quant_bits or not found.payload:
            return None
        return found.payload

    def save_system(self, text: str, tokens: int, payload: bytes, now: int) -> None:
        header = self._header(SaveReason.AGENT_SYSTEM, tokens, len(payload), now, now)
        self._kv.write(header, text.encode("utf-8"), payload, b"")

    # ---- sessions ------------------------------------------------------------

    def records(self) -> list[SessionRecord]:
        """This model's sessions, most recently used first."""
        mine = [r for r in self._index.records() if r.model_tag == self.model_tag]
        return sorted(mine, key=lambda r: (r.last_used, r.created_at), reverse=True)

    def sizes(self) -> dict[str, int]:
        by_sha = {e.sha: e.file_size for e in self._kv.entries()}
        return {r.id: by_sha.get(r.kv_sha, 0) for r in self.records()}

    def find(self, prefix: str) -> SessionRecord:
        records = self.records()
        chosen = resolve_prefix(prefix, [r.id for r in records])
        return next(r for r in records if r.id == chosen)

    def save(
        self,
        *,
        session_id: str,
        title: str,
        created_at: int,
        now: int,
        tokens: int,
        text: str,
        payload: bytes,
    ) -> SessionRecord:
        header = self._header(SaveReason.AGENT_SESSION, tokens, len(payload), created_at, now)
        sha = self._kv.write(header, text.encode("utf-8"), payload, b"")
        old = next((r for r in self._index.records() if r.id == session_id), None)
        record = SessionRecord(
            id=session_id,
            title=title,
            created_at=created_at,
            last_used=now,
            tokens=tokens,
            ctx=self.ctx,
            model_tag=self.model_tag,
            quant_bits=self.quant_bits,
            kv_sha=sha,
            payload_bytes=len(payload),
        )
        self._index.put(record)
        if old is not None and old.kv_sha != sha:
            self._drop_kv_if_unused(old.kv_sha)
        return record

    def load(self, record: SessionRecord) -> LoadedSession:
        found = self._kv.read(record.kv_sha)
        if found is None:
            raise Ds4Error(f"the KV file of session {record.id[:8]} is missing or damaged")
        h = found.header
        if h.model_tag != self.model_tag:
            raise Ds4Error("cached session was written for a different model")
        if h.quant_bits != self.quant_bits:
            raise Ds4Error("cached session was written with a different quantization")
        if h.payload_bytes != len(found.payload):
            raise Ds4Error("KV payload size mismatch")
        try:
            text = found.text.decode("utf-8")
        except UnicodeDecodeError:
            raise Ds4Error("cached session text is not UTF-8") from None
        return LoadedSession(record, text, found.payload)

    def touch(self, record: SessionRecord, now: int) -> None:
        self._index.put(replace(record, last_used=now))

    def delete(self, record: SessionRecord) -> None:
        self._index.remove(record.id)
        self._drop_kv_if_unused(record.kv_sha)

    def strip(
        self, record: SessionRecord, count_tokens: Callable[[str], int], now: int
    ) -> SessionRecord:
        """Drop the KV payload, keep the text (a later /switch prefills it again)."""
        loaded = self.load(record)
        tokens = max(1, count_tokens(loaded.text))
        found = self._kv.read(record.kv_sha)
        assert found is not None
        header = replace(found.header, tokens=tokens, payload_bytes=0, last_used=now)
        self._kv.write(header, found.text, b"", b"")
        stripped = replace(record, tokens=tokens, payload_bytes=0, last_used=now)
        self._index.put(stripped)
        return stripped

    def _drop_kv_if_unused(self, sha: str) -> None:
        if all(r.kv_sha != sha for r in self._index.records()):
            self._kv.delete(sha)
