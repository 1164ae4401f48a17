"""The server's checkpoints: its side of the disk KV cache (docs/reference/server.md
§4.2–4.5) and the in-memory state checkpoints (memory checkpoints, below).

The disk cache: what the worker asks of it, in job order: on a live miss, save the outgoing state
(`save_evicted`) and try a disk text-prefix load (`load`); prefill with the request's
saves (`prefill`: the `cold` checkpoint of a full miss, `continued` ones at every
frontier passed); decode with a per-token callback that saves continued frontiers
(`continued_saver`); at exit, save the live state (`save_at_shutdown`). Keys are the
detokenized bytes of the saved tokens, except that an evict/shutdown save of a state
bound to a visible transcript (docs/reference/server.md §5.6) is keyed by that transcript with its
header flag, so a client replaying the visible history finds it; the KTM trailer carries the tool
ids whose sampled DSML occurs in the key, and is imported into tool memory on load.
Every failure is logged and turns into "no checkpoint"; none reaches the client.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from ds4.domain.chat import EOS
from ds4.domain.engine.cancel import CancelCheck
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import PrefillProgress
from ds4.domain.generation.loop import OnToken, prefill
from ds4.domain.kvcache.disk_cache import DiskCache
from ds4.domain.kvcache.kv_file import KvcFlags, SaveReason
from ds4.domain.kvcache.policy import KvCacheOptions, chat_anchor, continued_target, store_len
from ds4.domain.serving.live import DiskKey, after_visible
from ds4.domain.tools import ToolReplayMemory
from ds4.ports.compute import StateCheckpoint
from ds4.ports.tokenizer import Tokenizer

Log = Callable[[str], None]
EOS_BYTES = EOS.encode()
# Continued saves stop once a tools-enabled turn has begun a tool call
# (docs/reference/server.md §4.5).
TOOL_START_MARKERS = ("<｜DSML｜tool_calls>", "<DSML｜tool_calls>", "<tool_calls>")
_MARKER_BYTES = tuple(m.encode() for m in TOOL_START_MARKERS)
_MARKER_TAIL = 2 * max(len(m) for m in _MARKER_BYTES)


def _key_kind(flags: KvcFlags) -> str:
    if flags & KvcFlags.RESPONSES_VISIBLE:
        return "responses-visible"
    if flags & KvcFlags.THINKING_VISIBLE:
        return "thinking-visible"
    return "token-text"


@dataclass(frozen=True)
class DiskHit:
    tokens: tuple[int, ...]  # the effective prompt: stored tokens + the tokenized suffix
    loaded: int  # tokens restored from the file
    sha: str
    tool_ids: int  # ids imported from the KTM trailer
    flags: KvcFlags = KvcFlags.NONE  # RESPONSES_VISIBLE / THINKING_VISIBLE: what the key is


class KvCheckpoints:
    def __init__(
        self,
        disk: DiskCache,
        tokenizer: Tokenizer,
        memory: ToolReplayMemory,
        *,
        memory_lock: AbstractContextManager[object] | None = None,
        disk_lock: AbstractContextManager[object] | None = None,
        log: Log = lambda _: None,
    ) -> None:
        """`disk_lock` serializes the disk cache when several slots share it (each slot
        has its own KvCheckpoints: the frontier mark belongs to one conversation)."""
        self.disk, self.tokenizer, self.memory = disk, tokenizer, memory
        self._lock: AbstractContextManager[object] = memory_lock or contextlib.nullcontext()
        self._disk_lock: AbstractContextManager[object] = disk_lock or contextlib.nullcontext()
        self._log = log
        self._frontier = 0  # the highest cold/continued position saved in this conversation

    @property
    def opts(self) -> KvCacheOptions:
        return self.disk.opts

    def key_text(self, tokens: Sequence[int]) -> bytes:
        """The token-text key: every token's bytes, specials as their literal text."""
        return b"".join(self.tokenizer.token_bytes(t) for t in tokens)

    # ---- saving --------------------------------------------------------------

    def store(
        self, session: EngineSession, reason: SaveReason, n: int, key: DiskKey | None = None
    ) -> bool:
        """Save the live state, which must hold exactly `n` tokens, as `reason`; keyed by
        `key` (a visible transcript) when given, else by the tokens' text."""
        name = reason.name.lower()
        if n < self.opts.min_tokens:
            return False
        if session.pos != n:
            self._log(
                f"kv cache skipped reason={name}: live checkpoint is at {session.pos}, not {n}"
            )
            return False
        flags = KvcFlags.NONE
        if key is not None:
            text, flags = key.text, key.flags
        else:
            try:
                text = self.key_text(session.tokens).decode("utf-8")
            except UnicodeDecodeError:
                self._log(f"kv cache skipped reason={name}: key ends inside a UTF-8 character")
                return False
        with self._lock:
            trailer = self.memory.ktm_trailer(text)
        try:
            with self._disk_lock:
                saved = self.disk.save(
                    session, text.encode("utf-8"), reason, flags=flags, trailer=trailer
                )
        except (OSError, Ds4Error) as exc:
            self._log(f"kv cache store failed reason={name} tokens={n}: {exc}")
            return False
        if saved and reason in (SaveReason.COLD, SaveReason.CONTINUED):
            self._frontier = max(self._frontier, n)
        return saved

    def save_evicted(self, session: EngineSession, key: DiskKey | None = None) -> None:
        """The live state does not serve the next request: save it (`evict`) and start
        the frontiers of a new conversation."""
        self._frontier = 0
        if session.pos >= self.opts.min_tokens:
            self.store(session, SaveReason.EVICT, session.pos, key)

    def save_at_shutdown(self, session: EngineSession, key: DiskKey | None = None) -> None:
        if session.pos >= self.opts.min_tokens:
            self.store(session, SaveReason.SHUTDOWN, session.pos, key)

    def _save_frontier(self, session: EngineSession) -> None:
        """A `continued` save when the live state sits on a frontier not yet saved."""
        if continued_target(session.pos, self._frontier, self.opts):
            self.store(session, SaveReason.CONTINUED, session.pos)

    # ---- prefill and decode --------------------------------------------------

    def prefill(
        self, session: EngineSession, prompt: Sequence[int], *, cold: bool, cancel: CancelCheck
    ) -> Generator[PrefillProgress, None, int]:
        """loop.prefill with the request's saves; returns the reused token count.

        `cold` (a full miss): prefill to the cold cut, save it (`cold`), then the rest
        (docs/reference/server.md §4.4). Every frontier passed gets a `continued` save (after each
        chunk and at the end, docs/reference/server.md §4.5), except that a cut on a frontier is
        marked saved beforehand, so it is written once, as `cold` (frontiers before it then go
        unsaved, as docs/reference/server.md §4.4's mark implies); the mark is undone when the cold
        save fails."""
        if len(prompt) < self.opts.min_tokens:
            # Once per request: the reason a short prompt never reaches the disk, which
            # is otherwise invisible until a restart shows cached_tokens=0.
            self._log(
                f"kv cache not saved: prompt has {len(prompt)} tokens, under "
                f"min_tokens={self.opts.min_tokens} (--kv-cache-min-tokens)"
            )
        cut = self.cold_length(prompt) if cold else 0
        if cut and session.common_prefix(prompt) >= cut:
            cut = 0  # the live state already holds the cut: nothing cold about it
        before = self._frontier
        if cut and continued_target(cut, self._frontier, self.opts):
            self._frontier = cut
        cached = -1
        if 0 < cut < len(prompt):
            cached = yield from self._prefill_saving(session, prompt[:cut], cancel)
            if not self.store(session, SaveReason.COLD, cut):
                self._frontier = before
        reused = yield from self._prefill_saving(session, prompt, cancel)
        self._save_frontier(session)
        if cut == len(prompt) and not self.store(session, SaveReason.COLD, cut):
            self._frontier = before
        return reused if cached < 0 else cached

    def _prefill_saving(
        self, session: EngineSession, prompt: Sequence[int], cancel: CancelCheck
    ) -> Generator[PrefillProgress, None, int]:
        """loop.prefill, checking for a continued frontier after every chunk."""
        events = prefill(session, prompt, cancel=cancel)
        while True:
            try:
                event = next(events)
            except StopIteration as done:
                return int(done.value)
            self._save_frontier(session)
            yield event

    def continued_saver(self, session: EngineSession, *, tools_active: bool) -> OnToken:
        """The per-token callback of one decode (loop.decode_turn's on_token): a
        `continued` save at each frontier, until a tools-enabled turn begins a call."""
        tail = bytearray()
        started = False

        def after_token(token: int) -> None:
            nonlocal started
            if tools_active and not started:
                tail.extend(self.tokenizer.token_bytes(token))
                del tail[: max(0, len(tail) - _MARKER_TAIL)]
                started = any(m in tail for m in _MARKER_BYTES)
            if not started:
                self._save_frontier(session)

        return after_token

    # ---- cold geometry -------------------------------------------------------

    def cold_length(self, prompt: Sequence[int]) -> int:
        """Where a cold prompt's checkpoint cuts (0: no cold save),
        docs/reference/server.md §4.4."""
        opts, n = self.opts, len(prompt)
        if opts.cold_max_tokens <= 0 or not opts.min_tokens <= n <= opts.cold_max_tokens:
            return 0
        special = self.tokenizer.special
        anchor = chat_anchor(prompt, special.user, special.assistant, opts.min_tokens)
        return anchor if anchor >= opts.min_tokens else store_len(n, opts)

    # ---- loading -------------------------------------------------------------

    def load(
        self, session: EngineSession, prompt_text: str, *, more_than: int = 0
    ) -> DiskHit | None:
        """Restore the longest checkpoint whose key prefixes the prompt
        (docs/reference/server.md §4.3)."""
        prompt = prompt_text.encode("utf-8")
        try:
            with self._disk_lock:
                hit = self.disk.load(session, prompt, more_than=more_than)
        except (OSError, Ds4Error) as exc:
            session.invalidate()
            self._log(f"kv cache load failed: {exc}")
            return None
        if hit is None:
            return None
        start = hit.text_bytes
        if hit.flags & (KvcFlags.RESPONSES_VISIBLE | KvcFlags.THINKING_VISIBLE):
            # a visible transcript's state lacks its final EOS (live.after_visible)
            start -= len(EOS_BYTES) if prompt[:start].endswith(EOS_BYTES) else 0
        try:
            suffix = prompt[start:].decode("utf-8")
        except UnicodeDecodeError:
            session.invalidate()
            self._log(f"kv cache load failed sha={hit.sha}: key ends inside a UTF-8 character")
            return None
        tokens = tuple(session.tokens) + tuple(self.tokenizer.encode(suffix) if suffix else ())
        imported = 0
        if hit.flags & KvcFlags.KTM_TRAILER:
            with self._lock:
                imported = self.memory.load_ktm(hit.trailer)
        self._frontier = hit.tokens
        self._log(
            f"kv cache hit text tokens={hit.tokens} text={hit.text_bytes} "
            f"quant={self.disk.quant_bits} key={_key_kind(hit.flags)} sha={hit.sha} "
            f"tool_ids={imported}"
        )
        return DiskHit(tokens, hit.tokens, hit.sha, imported, hit.flags)

    def discard(self, sha: str, why: str) -> None:
        try:
            with self._disk_lock:
                self.disk.discard(sha, why)
        except (OSError, Ds4Error) as exc:
            self._log(f"kv cache could not delete sha={sha}: {exc}")

    def import_tool_memory(self) -> int:
        """Load every file's KTM trailer into tool memory (ids sent after a restart)."""
        imported = 0
        try:
            with self._disk_lock:
                trailers = self.disk.tool_trailers()
        except (OSError, Ds4Error) as exc:
            self._log(f"kv cache tool map scan failed: {exc}")
            return 0
        with self._lock:
            for trailer in trailers:
                imported += self.memory.load_ktm(trailer)
        if imported:
            self._log(f"kv cache tool map: {imported} ids from {len(trailers)} files")
        return imported


# ---- memory checkpoints ----------------------------------------------------
# In-memory KV checkpoints within a byte budget (ADR 0049, docs/kv-cache.md).
#
# The live state forgets: its rewind history is bounded, so a request that parts from it
# further back than that (a retry after a long reply, a side request in between) would
# prefill from the start what was prefilled before. The worker keeps whole-state copies
# (`EngineSession.checkpoint()`) here:
#
# - a prompt's end, when its turn is over and the live state can no longer rewind to it
#   exactly (the reply outgrew the history, or the state was rewritten);
# - the live state a miss replaces (`evict`).
#
# A request the live state cannot continue takes the entry that keeps the most of it: by
# token prefix, cut to the entry's exact rewind floors (what `EngineSession.reuse` would keep
# once restored), or by text prefix (the entry's tokens plus the tokenization of the rest
# of the prompt text, as the live `memory-text` continuation does). The worker takes it
# only when it keeps more than the live state can.
#
# Eviction is least recently used first (storing and a hit are uses), by bytes: the newest
# conversations' states stay. A new entry with the same tokens as an old one replaces it.
# Every slot of `--sessions N` shares the store (a checkpoint restores into any session
# of the runner that took it), so `lock` guards it; checkpoints are taken and restored
# outside the lock.


MEMORY_CHECKPOINT = "memory-checkpoint"  # the cache decision's source for a hit here


@dataclass
class _Entry:
    checkpoint: StateCheckpoint
    tokens: tuple[int, ...]
    text: str  # the tokens' text: a prompt that starts with it continues the entry
    reason: str
    used: int  # the store's use counter at the last store or hit
    handed_out: bool = False  # given to a slot for the disk at shutdown
    visible: bool = False  # `text` is a Responses visible transcript, not the tokens' text

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

    def keep_live(self, session: EngineSession, reason: str, visible: str | None = None) -> bool:
        """Store a copy of the live state (when `worth_keeping`); `visible`: the
        Responses transcript it is bound to, its text key instead of the tokens' text."""
        if not self.worth_keeping(session.tokens):
            return False
        return self.add(session.checkpoint(), reason, visible)

    def add(self, checkpoint: StateCheckpoint, reason: str, visible: str | None = None) -> bool:
        """Store `checkpoint`, evicting the least recently used entries beyond the
        budget; False when it is too short or alone larger than the budget. A prompt
        that starts with `visible` (when given) continues it by text, as one that starts
        with the tokens' text does (a Responses state holds reasoning its replay does
        not show: docs/reference/server.md §5.3)."""
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
        # outside the lock: a long state takes a while
        text = self._tokenizer.decode(tokens) if visible is None else visible
        with self._lock:
            self._entries = [e for e in self._entries if e.tokens != tokens]
            entry = _Entry(
                checkpoint, tokens, text, reason, self._use(), visible=visible is not None
            )
            self._entries.append(entry)
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
            if chosen.visible:  # the state lacks the transcript's final EOS
                rest = after_visible(chosen.text, prompt_text)
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
        return [checkpoint for checkpoint, _ in self.take_keyed_for_disk()]

    def take_keyed_for_disk(self) -> list[tuple[StateCheckpoint, str | None]]:
        """`take_for_disk`, each with its visible transcript (None: keyed by its tokens)."""
        with self._lock:
            fresh = [e for e in self._by_use() if not e.handed_out]
            for entry in fresh:
                entry.handed_out = True
        return [(e.checkpoint, e.text if e.visible else None) for e in fresh]

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
