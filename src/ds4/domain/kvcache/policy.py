"""When to save, how long a checkpoint is, which file to load, which to evict
(docs/reference/formats.md §10).

Pure functions over plain values; the disk adapter and the server call them.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ds4.domain.kvcache.kv_file import KvcHeader, SaveReason

HIT_HALF_LIFE_S = 21600.0  # six hours
MIN_EFFECTIVE_HITS = 0.01
# Checkpoints that anchor a conversation (its cold start, or the state a switch or a
# shutdown would otherwise lose) are worth more than periodic "continued" frontiers.
ANCHOR_REASONS = frozenset({SaveReason.COLD, SaveReason.EVICT, SaveReason.SHUTDOWN})
ANCHOR_SCORE_FACTOR = 4.0
# An entry that the file being written strictly extends is mostly redundant with it.
EXTENDED_PREFIX_PENALTY = 0.25


@dataclass(frozen=True)
class KvCacheOptions:
    budget_bytes: int = 4096 * 2**20  # 0: unlimited
    min_tokens: int = 512
    cold_max_tokens: int = 30000  # 0 disables cold saves
    continued_interval_tokens: int = 10000  # 0 disables continued saves
    boundary_trim_tokens: int = 32
    boundary_align_tokens: int = 2048  # 0 disables alignment
    reject_different_quant: bool = False

    @property
    def continued_step(self) -> int:
        interval, align = self.continued_interval_tokens, self.boundary_align_tokens
        if interval <= 0:
            return 0
        return math.ceil(interval / align) * align if align > 0 else interval


@dataclass(frozen=True)
class CacheEntry:
    """A listed `.kv` file: its key digest, header, key length and size on disk."""

    sha: str
    header: KvcHeader
    text_bytes: int
    file_size: int


def store_len(n: int, opts: KvCacheOptions) -> int:
    """Where a cold save of an n-token prompt cuts: trimmed off the boundary, aligned."""
    if n > opts.min_tokens + opts.boundary_trim_tokens:
        s = n - opts.boundary_trim_tokens
        if opts.boundary_align_tokens > 0:
            s -= s % opts.boundary_align_tokens
        if s >= opts.min_tokens:
            return s
    return n


def chat_anchor(tokens: Sequence[int], user_id: int, assistant_id: int, min_tokens: int) -> int:
    """Index of the last <｜User｜> before the first <｜Assistant｜> (0 if none or < min)."""
    anchor = 0
    for i, tok in enumerate(tokens):
        if tok == assistant_id:
            break
        if tok == user_id:
            anchor = i
    return anchor if anchor >= min_tokens else 0


def continued_target(live: int, last_store: int, opts: KvCacheOptions) -> bool:
    step = opts.continued_step
    return step > 0 and live >= opts.min_tokens and live % step == 0 and live > last_store


def required_bytes(text: int, payload: int, trailer: int) -> int:
    """Bytes a new file needs, with the reference's 1% margin."""
    size = 52 + text + payload + trailer
    return size + math.ceil(size / 100)


def entry_score(
    entry: CacheEntry,
    now: int,
    protected: str | None = None,
    pending_key: bytes | None = None,
    key_of: dict[str, bytes] | None = None,
) -> float:
    """Higher is kept longer: tokens per byte, boosted by recent hits and anchor reasons."""
    if entry.file_size == 0:
        return 0.0
    if entry.sha == protected:
        return math.inf
    h = entry.header
    if not h.has_checksum:
        return 0.0  # never loaded (ADR 0007): the first to go when room is needed
    used = h.last_used or h.created_at
    hits = 0.0
    if used and h.hits:
        hits = h.hits * 2.0 ** (-max(0, now - used) / HIT_HALF_LIFE_S)
        hits = 0.0 if hits < MIN_EFFECTIVE_HITS else hits
    score = (hits + 1.0) * h.tokens / entry.file_size
    if h.reason in ANCHOR_REASONS:
        score *= ANCHOR_SCORE_FACTOR
    if pending_key is not None and key_of is not None:
        key = key_of.get(entry.sha)
        if key is not None and len(key) < len(pending_key) and pending_key.startswith(key):
            score *= EXTENDED_PREFIX_PENALTY
    return score


def eviction_victims(
    entries: Sequence[CacheEntry],
    budget: int,
    now: int,
    *,
    protected: str | None = None,
    incoming_bytes: int = 0,
    pending_key: bytes | None = None,
    key_of: dict[str, bytes] | None = None,
) -> list[CacheEntry]:
    """Entries to delete, in order, so the directory (plus `incoming_bytes`) fits the budget.

    The protected entry (the file just written) is spared unless it alone exceeds the
    budget. `pending_key`/`key_of` penalise entries the incoming file strictly extends.
    """
    if budget <= 0:
        return []
    total = sum(e.file_size for e in entries) + incoming_bytes
    if protected is not None:
        own = next((e for e in entries if e.sha == protected), None)
        if own is not None and own.file_size > budget:
            protected = None
    ranked = sorted(
        entries,
        key=lambda e: (entry_score(e, now, protected, pending_key, key_of), e.header.last_used),
    )
    victims = []
    for entry in ranked:
        if total <= budget:
            break
        if entry.sha == protected:
            continue
        victims.append(entry)
        total -= entry.file_size
    return victims


def find_prefix_entry(
    entries: Sequence[CacheEntry],
    prompt: bytes,
    *,
    quant_bits: int,
    ctx: int,
    model_tag: int,
    opts: KvCacheOptions,
) -> CacheEntry | None:
    """The usable entry whose key is the longest byte prefix of `prompt` (then most tokens).

    Only files with the integrity footer qualify (docs/adr/0007-kv-file-integrity.md)."""
    best: CacheEntry | None = None
    for e in entries:
        h = e.header
        if not h.has_checksum:
            continue  # cannot be verified (ADR 0007)
        if e.text_bytes > len(prompt) or h.tokens < opts.min_tokens or h.ctx > ctx:
            continue
        if opts.reject_different_quant and h.quant_bits != quant_bits:
            continue
        if h.model_tag and model_tag and h.model_tag != model_tag:
            continue
        if best is not None and (
            e.text_bytes < best.text_bytes
            or (e.text_bytes == best.text_bytes and h.tokens <= best.header.tokens)
        ):
            continue
        if hashlib.sha1(prompt[: e.text_bytes]).hexdigest() == e.sha:
            best = e
    return best
