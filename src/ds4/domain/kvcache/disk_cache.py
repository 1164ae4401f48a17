"""Save and load live sessions as `.kv` checkpoints (docs/reference/formats.md §10.3–10.5,
docs/reference/server.md §4.3).

The orchestration between the live EngineSession (its payload bytes and token history), the
store (files) and the policy (lengths, budget, scores). A checkpoint that fails to
load is deleted, never retried; a loaded checkpoint is kept (only the budget evicts it).
Every file is written with the integrity footer (ADR 0007); the store verifies it before
handing out any byte and moves a damaged file aside, so damage is a logged miss here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace

from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.kvcache.kv_file import KvcFlags, KvcHeader, SaveReason
from ds4.domain.kvcache.policy import (
    CacheEntry,
    KvCacheOptions,
    eviction_victims,
    find_prefix_entry,
    required_bytes,
)
from ds4.ports.kv_store import KVStore
from ds4.ports.system import Clock

Log = Callable[[str], None]
MAX_LOAD_ATTEMPTS = 8  # failed loads delete their file; this only bounds a racing writer


@dataclass(frozen=True)
class LoadedCheckpoint:
    sha: str
    text_bytes: int  # prompt bytes covered by the loaded tokens
    tokens: int
    flags: KvcFlags
    trailer: bytes  # KTM section when flags has KTM_TRAILER


class DiskCache:
    def __init__(
        self,
        store: KVStore,
        clock: Clock,
        opts: KvCacheOptions,
        *,
        quant_bits: int,
        model_tag: int,
        log: Log = lambda _: None,
    ) -> None:
        self.store, self.clock, self.opts = store, clock, opts
        self.quant_bits, self.model_tag, self._log = quant_bits, model_tag, log
        self._evict(protected=None)

    # ---- saving --------------------------------------------------------------

    def save(
        self,
        session: EngineSession,
        key_text: bytes,
        reason: SaveReason,
        *,
        flags: KvcFlags = KvcFlags.NONE,
        trailer: bytes = b"",
    ) -> bool:
        """Write the session's whole state under `key_text`; False when skipped."""
        tokens = session.pos
        if tokens < self.opts.min_tokens or self.quant_bits not in (2, 4):
            return False
        if len(key_text) >= 2**32:
            return False
        payload = session.payload()
        need = required_bytes(len(key_text), len(payload), len(trailer))
        budget = self.opts.budget_bytes
        if budget > 0 and need > budget:
            self._log(f"kv cache skip store: needs {need} bytes, budget {budget}")
            return False
        if trailer:
            flags |= KvcFlags.KTM_TRAILER
        now = self.clock.now()
        sha = hashlib.sha1(key_text).hexdigest()
        existing = self._entry(sha)
        if existing is not None and self._compatible(existing, key_text, session.ctx):
            header = existing.header
            if trailer:
                header = replace(header, flags=header.flags | flags, last_used=now)
            self.store.replace_trailer(sha, header, trailer)
            self._log(
                f"kv cache kept reason={reason.name.lower()} tokens={tokens} sha={sha} "
                "(same key already stored)"
            )
            return True
        if existing is not None:
            self.store.delete(sha)
        self._evict(protected=None, incoming=need, pending_key=key_text)
        header = KvcHeader(
            quant_bits=self.quant_bits,
            reason=reason,
            flags=flags | KvcFlags.CHECKSUM,
            tokens=tokens,
            hits=0,
            ctx=session.ctx,
            model_tag=self.model_tag,
            created_at=now,
            last_used=now,
            payload_bytes=len(payload),
        )
        self.store.write(header, key_text, payload, trailer)
        self._log(
            f"kv cache stored reason={reason.name.lower()} tokens={tokens} sha={sha} "
            f"size={52 + len(key_text) + len(payload) + len(trailer)} bytes"
        )
        self._evict(protected=sha)
        return True

    def _entry(self, sha: str) -> CacheEntry | None:
        return next((e for e in self.store.entries() if e.sha == sha), None)

    def _compatible(self, entry: CacheEntry, key_text: bytes, ctx: int) -> bool:
        h = entry.header
        if not h.has_checksum:
            return False  # a file we cannot verify is replaced, not kept
        if self.opts.reject_different_quant and h.quant_bits != self.quant_bits:
            return False
        if h.model_tag and h.model_tag != self.model_tag:
            return False
        return h.ctx <= ctx and self.store.read_key(entry.sha) == key_text

    def _evict(
        self, *, protected: str | None, incoming: int = 0, pending_key: bytes | None = None
    ) -> None:
        entries = self.store.entries()
        key_of: dict[str, bytes] = {}
        if pending_key is not None:
            for e in entries:
                if e.text_bytes < len(pending_key):
                    key = self.store.read_key(e.sha)
                    if key is not None:
                        key_of[e.sha] = key
        victims = eviction_victims(
            entries,
            self.opts.budget_bytes,
            self.clock.now(),
            protected=protected,
            incoming_bytes=incoming,
            pending_key=pending_key,
            key_of=key_of,
        )
        for victim in victims:
            self._log(
                f"kv cache evicted reason=disk-cache-full tokens={victim.header.tokens} "
                f"hits={victim.header.hits} size={victim.file_size}"
            )
            self.store.delete(victim.sha)

    def discard(self, sha: str, why: str) -> None:
        """Delete a checkpoint that loaded but could not be used (never retried)."""
        self._log(f"kv cache discarded sha={sha}: {why}")
        self.store.delete(sha)

    def tool_trailers(self) -> list[bytes]:
        """The KTM trailers of every verifiable file that has one (tool memory at start-up)."""
        return [
            self.store.read_trailer(e.sha)
            for e in self.store.entries()
            if e.header.flags & KvcFlags.KTM_TRAILER and e.header.has_checksum
        ]

    # ---- loading -------------------------------------------------------------

    def load(
        self, session: EngineSession, prompt_text: bytes, *, more_than: int = 0
    ) -> LoadedCheckpoint | None:
        """Restore the longest usable checkpoint whose key prefixes `prompt_text`.

        A checkpoint that fails to load is deleted and the next best one is tried
        (each failure removes a file, so this ends). `more_than`: leave the session
        alone unless the checkpoint holds more tokens (the live state already shares
        that many with the prompt)."""
        for _ in range(MAX_LOAD_ATTEMPTS):
            entry = find_prefix_entry(
                self.store.entries(),
                prompt_text,
                quant_bits=self.quant_bits,
                ctx=session.ctx,
                model_tag=self.model_tag,
                opts=self.opts,
            )
            if entry is None or entry.header.tokens <= more_than:
                return None
            loaded = self._load_entry(session, prompt_text, entry)
            if loaded is not None or self._entry(entry.sha) is not None:
                return loaded  # success, or a failure that left the file: stop here
        return None

    def _load_entry(
        self, session: EngineSession, prompt_text: bytes, entry: CacheEntry
    ) -> LoadedCheckpoint | None:
        kv = self.store.read(entry.sha)
        if kv is None:
            self._log(f"kv cache miss sha={entry.sha}: the file failed its checks or vanished")
            return None
        if not prompt_text.startswith(kv.text):
            self._log(f"kv cache load failed sha={entry.sha}: key changed")
            return None
        try:
            session.load_payload(kv.payload)  # empties the session when the payload is bad
        except Ds4Error as exc:
            self.discard(entry.sha, str(exc))
            return None
        if session.pos != kv.header.tokens:
            session.invalidate()
            self.discard(entry.sha, "token count differs from header")
            return None
        try:
            self.store.update_header(entry.sha, kv.header.touched(self.clock.now()))
        except OSError as exc:  # e.g. a read-only directory: the load itself stands
            self._log(f"kv cache could not record the hit sha={entry.sha}: {exc}")
        return LoadedCheckpoint(
            entry.sha, len(kv.text), kv.header.tokens, kv.header.flags, kv.trailer
        )
