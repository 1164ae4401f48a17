"""In-memory KV checkpoints within a byte budget (ADR 0049, docs/kv-cache.md).

The live state forgets: its rewind history is bounded, so a request that parts from it
further back than that (a retry after a long reply, a side request in between) would
prefill from the start what was prefilled before. The worker keeps whole-state copies
(`EngineSession.checkpoint()`) here:

- a prompt's end, when its turn is over and the live state can no longer rewind to it
  exactly (the reply outgrew the history, or the state was rewritten);
- the live state a miss replaces (`evict`).

A request the live state cannot continue takes the entry that keeps the most of it: by
token prefix, cut to the entry's exact rewind floors (what `EngineSession.reuse` would keep
once restored), or by text prefix (the entry's tokens plus the tokenization of the rest
of the prompt text, as the live `memory-text` continuation does). The worker takes it
only when it keeps more than the live state can.

Eviction is least recently used first (storing and a hit are uses), by bytes: the newest
conversations' states stay. A new entry with the same tokens as an old one replaces it.
Every slot of `--sessions N` shares the store (a checkpoint restores into any session
of the runner that took it), so `lock` guards it; checkpoints are taken and restored
outside the lock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from ds4.domain.engine.session import EngineSession
from ds4.ports.compute import StateCheckpoint
from ds4.ports.tokenizer import Tokenizer

Log = Callable[[str], None]

MEMORY_CHECKPOINT = "memory-checkpoint"  # the cache decision's source for a hit here


@dataclass
class _Entry:
    checkpoint: StateCheckpoint
    tokens: tuple[int, ...]
    text: str  # the tokens' text: a prompt that starts with it continues the entry
    reason: str
    used: int  # the store's use counter at the last store or hit
    handed_out: bool = False  # given to a slot for the disk at shutdown

    @property
    def nbytes(self) -> int:
        return self.checkpoint.nbytes


@dataclass(frozen=True)
class MemoryHit:
    checkpoint: StateCheckpoint
    tokens: tuple[int, ...]  # the effective prompt (a text match re-tokenizes the rest)
    keep: int  # the tokens of the checkpoint the prompt keeps
    match: str  # "token" or "text"


def _reach(
    session: EngineSession, entry: _Entry, prompt: Sequence[int], prompt_text: str
) -> tuple[int, str]:
    """What restoring `entry` keeps of the prompt: by token prefix, or all of it when
    its text is a proper prefix of the prompt's."""
    keep = session.reusable_from(entry.checkpoint, prompt)
    held = len(entry.tokens)
    if keep < held and len(entry.text) < len(prompt_text) and prompt_text.startswith(entry.text):
        return held, "text"
    return keep, "token"


class MemoryCheckpoints:
    def __init__(
        self,
        budget_bytes: int,
        tokenizer: Tokenizer,
        *,
        min_tokens: int = 1,
        lock: AbstractContextManager[object] | None = None,
        log: Log = lambda _: None,
    ) -> None:
        """`budget_bytes` bounds the checkpoints' `nbytes` together (0: keep none);
        states shorter than `min_tokens` are not kept."""
        self.budget = max(0, budget_bytes)
        self.min_tokens = max(1, min_tokens)
        self._tokenizer = tokenizer
        self._lock: AbstractContextManager[object] = lock or contextlib.nullcontext()
        self._log = log
        self._entries: list[_Entry] = []
        self._uses = 0

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(e.nbytes for e in self._entries)

    def tokens(self) -> list[tuple[int, ...]]:
        """The kept states' tokens, most recently used first."""
        with self._lock:
            return [e.tokens for e in self._by_use()]

    def worth_keeping(self, tokens: Sequence[int]) -> bool:
        """Whether a state holding `tokens` would be stored: long enough, a budget, and
        not already here (a hit restored exactly to it counts as a use instead)."""
        if self.budget == 0 or len(tokens) < self.min_tokens:
            return False
        key = tuple(tokens)
        with self._lock:
            for entry in self._entries:
                if entry.tokens == key:
                    entry.used = self._use()
                    return False
        return True

    def keep_live(self, session: EngineSession, reason: str) -> bool:
        """Store a copy of the live state (when `worth_keeping`)."""
        if not self.worth_keeping(session.tokens):
            return False
        return self.add(session.checkpoint(), reason)

    def add(self, checkpoint: StateCheckpoint, reason: str) -> bool:
        """Store `checkpoint`, evicting the least recently used entries beyond the
        budget; False when it is too short or alone larger than the budget."""
        tokens = tuple(checkpoint.tokens)
        size = checkpoint.nbytes
        if self.budget == 0 or len(tokens) < self.min_tokens:
            return False
        if size > self.budget:
            self._log(
                f"kv memory skipped reason={reason} tokens={len(tokens)}: needs {size} "
                f"bytes, budget {self.budget}"
            )
            return False
        text = self._tokenizer.decode(tokens)  # outside the lock: a long state takes a while
        with self._lock:
            self._entries = [e for e in self._entries if e.tokens != tokens]
            self._entries.append(_Entry(checkpoint, tokens, text, reason, self._use()))
            evicted = self._evict()
            total = sum(e.nbytes for e in self._entries)
            count = len(self._entries)
        for old in evicted:
            self._log(
                f"kv memory evicted reason={old.reason} tokens={len(old.tokens)} "
                f"bytes={old.nbytes} (least recently used)"
            )
        self._log(
            f"kv memory stored reason={reason} tokens={len(tokens)} bytes={size} "
            f"(entries={count}, {total} of {self.budget} bytes)"
        )
        return True

    def best(
        self, session: EngineSession, prompt: Sequence[int], prompt_text: str
    ) -> MemoryHit | None:
        """The entry that keeps the most of `prompt` once restored into `session`
        (ties: a token match, then the most recently used); None when none keeps any.
        Nothing changes until the caller takes it (`taken`)."""
        chosen: _Entry | None = None
        rank, keep, match = (0, False, 0), 0, "token"
        with self._lock:
            for entry in self._entries:
                k, m = _reach(session, entry, prompt, prompt_text)
                r = (k, m == "token", entry.used)
                if k > 0 and r > rank:
                    chosen, rank, keep, match = entry, r, k, m
        if chosen is None:
            return None
        tokens = tuple(prompt)
        if match == "text":
            rest = prompt_text[len(chosen.text) :]
            tokens = chosen.tokens + tuple(self._tokenizer.encode(rest))
            if len(tokens) >= session.ctx:
                return None
        return MemoryHit(chosen.checkpoint, tokens, keep, match)

    def taken(self, hit: MemoryHit) -> None:
        """The worker restored `hit`: a use (and a log line)."""
        with self._lock:
            entry = next((e for e in self._entries if e.checkpoint is hit.checkpoint), None)
            if entry is not None:
                entry.used = self._use()
        reason = entry.reason if entry is not None else "evicted since"
        self._log(
            f"kv memory hit tokens={len(hit.checkpoint.tokens)} kept={hit.keep} "
            f"match={hit.match} reason={reason}"
        )

    def take_for_disk(self) -> list[StateCheckpoint]:
        """At shutdown: the entries no slot has taken yet, most recently used first, each
        handed out once (every slot saves a share on its own thread)."""
        with self._lock:
            fresh = [e for e in self._by_use() if not e.handed_out]
            for entry in fresh:
                entry.handed_out = True
        return [e.checkpoint for e in fresh]

    # ---- under the lock ------------------------------------------------------

    def _use(self) -> int:
        self._uses += 1
        return self._uses

    def _by_use(self) -> list[_Entry]:
        return sorted(self._entries, key=lambda e: e.used, reverse=True)

    def _evict(self) -> list[_Entry]:
        """Drop the least recently used entries until the rest fit the budget."""
        evicted: list[_Entry] = []
        while sum(e.nbytes for e in self._entries) > self.budget:
            oldest = min(self._entries, key=lambda e: e.used)
            self._entries.remove(oldest)
            evicted.append(oldest)
        return evicted
