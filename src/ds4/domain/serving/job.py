"""One job on the inference worker: cache decision, prefill, decode, tool ids.

Pure orchestration over the EngineSession and the generation loop; the HTTP
adapter runs it on its single worker thread and maps the events per API.
Cache decision (docs/reference/server.md §4.2, prepare.cache_decision): the live bindings of
docs/reference/server.md §5 (Responses visible transcript and call ids, Anthropic tool_use ids, the
tool-less thinking transcript), the live tokens as a prefix ("memory-token"), the live text as
a byte prefix ("memory-text"); otherwise (a miss, docs/kv-cache.md's decision order) the
outgoing state is kept (in memory, and on disk as "evict", keyed by its visible transcript
when bound), and the prompt continues from whichever keeps the most of it: the live
state rewound to an exact point, an in-memory checkpoint ("memory-checkpoint",
checkpoints.MemoryCheckpoints), a stored text prefix ("disk-text"); with nothing kept a
"cold" checkpoint may be cut (docs/reference/server.md §4.4). Continued
checkpoints are written at aligned frontiers while prefilling and, through the decode loop's
per-token callback, while decoding (docs/reference/server.md §4.5); a prompt's end stays in
memory when the reply outgrows the live state's rewind history; shutdown saves the live state
and the in-memory checkpoints.
After a successful prefill the bindings the job did not continue from are dropped; after the
turn they are remembered or cleared (docs/reference/server.md §4.8), and a chat or Anthropic turn
whose calls cannot be replayed exactly has its live state rewritten to the canonical rendering
before the reply goes out (docs/reference/server.md §6, canonicalize below).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from enum import Enum

from ds4.domain.chat import EOS, UNTHINK, has_tool_context
from ds4.domain.dsml.syntax import ToolCall, render_tool_calls
from ds4.domain.engine.cancel import CancelCheck, CancelledError, never_cancel
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import Finished, PrefillProgress, ToolCallStarted, Usage
from ds4.domain.generation.loop import (
    OnToken,
    TurnSettings,
    cut_by_context,
    decode_turn,
    ignore_token,
    prefill,
)
from ds4.domain.kvcache.kv_file import KvcFlags, SaveReason
from ds4.domain.sampling import SamplingParams, TokenLogprob, seed_from_bytes, token_logprob
from ds4.domain.serving.checkpoints import (
    MEMORY_CHECKPOINT,
    DiskHit,
    KvCheckpoints,
    MemoryCheckpoints,
)
from ds4.domain.serving.exchange import LogprobRequest, PromptReady, ServedEvent, ToolCallOpened
from ds4.domain.serving.live import (
    RESPONSES_TOOL_OUTPUT,
    RESPONSES_VISIBLE,
    DiskKey,
    LiveBindings,
    TurnFacts,
)
from ds4.domain.serving.prepare import CacheDecision, PreparedJob, cache_decision
from ds4.domain.tools import ToolApi, ToolReplayMemory
from ds4.ports.compute import StateCheckpoint
from ds4.ports.system import RandomSource
from ds4.ports.tokenizer import Tokenizer

# Thinking mode ignores the client's knobs (docs/reference/server.md §2.3).
THINKING_SAMPLING = SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.05)

Trace = Callable[[str], None]


def _no_trace(_line: str) -> None:
    return None


def _reply_top(asked: LogprobRequest | None) -> int | None:
    """The alternatives each reply token is scored with; None: not scored."""
    return asked.top if asked is not None and asked.completion else None


@dataclass
class Worker:
    """What one inference worker owns: a live session and what lives next to it (the
    server runs one, or one per slot with `--sessions N`)."""

    session: EngineSession
    tokenizer: Tokenizer
    memory: ToolReplayMemory
    random: RandomSource
    default_max_tokens: int
    memory_lock: AbstractContextManager[object] = field(default_factory=contextlib.nullcontext)
    trace: Trace = _no_trace
    kv: KvCheckpoints | None = None  # the disk KV cache (None: disabled)
    mem: MemoryCheckpoints | None = None  # in-memory checkpoints (None: disabled)
    warn: Trace = _no_trace  # what the operator should see (the server logs it)
    # docs/reference/server.md §5.1, next to the session
    live: LiveBindings = field(default_factory=LiveBindings)

    def settings(self, job: PreparedJob) -> TurnSettings:
        request = job.request
        if job.think_mode.thinking:
            base = THINKING_SAMPLING
        else:
            s = request.sampling
            base = SamplingParams(s.temperature, s.top_k, s.top_p, s.min_p)
        seed = request.sampling.seed or seed_from_bytes(self.random.token_bytes(8))
        max_tokens = request.max_tokens
        return TurnSettings(
            sampling=replace(base, seed=seed),
            max_tokens=self.default_max_tokens if max_tokens is None else max_tokens,
            stops=request.stops,
            tools_active=request.tools_active,
            thinking=job.think_mode.thinking,
            speculative=request.speculative,
            constraint=job.constraint,
            logprobs=_reply_top(request.logprobs),
        )

    def run(
        self,
        job: PreparedJob,
        *,
        cancel: CancelCheck = never_cancel,
        on_token: OnToken = ignore_token,
    ) -> Iterator[ServedEvent]:
        """The job's events; the last is Finished (tool calls carrying their ids).
        `on_token` runs after each decoded token, as decode_turn's does (the server
        times tokens with it).

        Raises Ds4Error when the prompt cannot be prefilled (nothing was generated),
        RequestError (CONFLICT) when it needs live tool state that is gone.
        """
        request = job.request
        self.trace(
            f"===== request api={request.api.value} model={request.model} "
            f"stream={request.stream} tools={len(request.schemas)} "
            f"think={job.think_mode.value} prompt_tokens={len(job.prompt_tokens)} ====="
        )
        self.trace(f"--- rendered prompt ---\n{job.prompt_text}")
        if job.request.logprobs is not None and job.request.logprobs.prompt:
            yield from self._run_scored(job, cancel, on_token)
            return
        live = self.session.pos
        try:
            decision = cache_decision(self.session.tokens, job, self.tokenizer, self.live)
        except Ds4Error as exc:
            self.trace(f"--- cache decision --- live={live} refused: {exc}")
            raise
        if decision.note:
            self.trace(f"--- {decision.note} ---")
        prompt, source, hit = decision.tokens, decision.source, None
        if source == "none":
            prompt, source, hit = self._on_miss(job, decision)
        self._warn_reasoning(job, source, hit)
        self.trace(
            f"--- cache decision --- live={live} prompt={len(job.prompt_tokens)} "
            f"common={decision.common} source={source} "
            f"disk={hit.sha if hit is not None else '-'} "
            f"replay mem={job.replay.mem} disk={job.replay.disk} "
            f"canonical={job.replay.canonical} missing_ids={job.replay.missing_ids}"
        )
        try:
            cached = yield from self._prefill(prompt, cold=source == "none", cancel=cancel)
        except CancelledError:
            yield Finished("cancelled", "", None, (), Usage(len(prompt), 0, 0))
            return
        except Ds4Error as exc:
            if hit is not None and self.kv is not None:
                self.kv.discard(hit.sha, f"prefill after the load failed: {exc}")
            raise
        self.live.keep_only(source)
        self.trace(f"--- prefill done --- cached={cached} evaluated={len(prompt) - cached}")
        prompt_end = self._prompt_end()
        yield PromptReady(len(prompt), cached, source)
        try:
            yield from self._decode(job, prompt, cached, cancel, on_token)
        finally:
            self._keep_prompt_end(prompt_end)

    def _run_scored(
        self, job: PreparedJob, cancel: CancelCheck, on_token: OnToken
    ) -> Iterator[ServedEvent]:
        """A job that wants its prompt's log-probabilities (completions' echo): the
        outgoing state is kept as on a miss, then the whole prompt is evaluated afresh
        with every position's logits (no cached prefix holds them) and scored chunk
        by chunk; the decode continues as usual. No disk checkpoints are cut while it
        prefills."""
        prompt = job.prompt_tokens
        logprobs = job.request.logprobs
        top = 0 if logprobs is None else logprobs.top
        if self.mem is not None and self.session.pos > 0:
            self.mem.keep_live(self.session, "evict")
        if self.kv is not None:
            self.kv.save_evicted(self.session, self.live.disk_key(self.session.pos))
        self.trace(f"--- scored prefill --- prompt={len(prompt)} (echo: no reuse)")
        token_bytes = self.tokenizer.token_bytes
        scores = [TokenLogprob(prompt[0], token_bytes(prompt[0]), None)]
        try:
            self.session.invalidate()
            for done, total, rows in self.session.extend_scored(prompt, cancel=cancel):
                first = done - len(rows)  # rows[i] follows prompt[first + i]
                for i in range(len(rows)):
                    if first + i + 1 < len(prompt):
                        target = prompt[first + i + 1]
                        scores.append(token_logprob(rows[i], target, top, token_bytes))
                yield PrefillProgress(done, total)
        except CancelledError:
            yield Finished("cancelled", "", None, (), Usage(len(prompt), 0, 0))
            return
        self.live.keep_only("none")
        yield PromptReady(len(prompt), 0, "none", prompt_logprobs=tuple(scores))
        for event in self._decode(job, prompt, 0, cancel, on_token):
            if isinstance(event, Finished):
                yield replace(event, prompt_logprobs=tuple(scores))
            else:
                yield event

    def reusable(self, job: PreparedJob) -> int:
        """Live tokens this job would keep if it ran here (the slot choice of ADR 0045);
        nothing changes. A job this worker would refuse (live tool state gone) keeps none."""
        try:
            decision = cache_decision(self.session.tokens, job, self.tokenizer, self.live)
        except Ds4Error:
            return 0
        return self.session.reusable(decision.tokens)

    def shutdown(self) -> None:
        """Clean exit, on the worker thread: save the live state (reason `shutdown`), then
        this slot's share of the in-memory checkpoints, so that they survive a restart."""
        if self.kv is None:
            return
        self.kv.save_at_shutdown(self.session, self.live.disk_key(self.session.pos))
        if self.mem is None:
            return
        for checkpoint, visible in self.mem.take_keyed_for_disk():
            self.session.restore(checkpoint)
            key = None if visible is None else _visible_key(visible)
            self.kv.store(self.session, SaveReason.SHUTDOWN, self.session.pos, key)

    def _warn_reasoning(self, job: PreparedJob, source: str, hit: DiskHit | None) -> None:
        """A stateless replay without its reasoning, and no state that still holds it."""
        if not job.live.requires_live_reasoning or source in (
            RESPONSES_VISIBLE,
            RESPONSES_TOOL_OUTPUT,
        ):
            return
        if hit is not None and hit.flags & KvcFlags.RESPONSES_VISIBLE:
            return
        self.trace(
            "--- warning: responses replay of a tool call is missing reasoning state; "
            "continuing from visible history ---"
        )

    # ---- a live miss: in-memory and disk checkpoints ----------------------------

    def _on_miss(
        self, job: PreparedJob, decision: CacheDecision
    ) -> tuple[tuple[int, ...], str, DiskHit | None]:
        """The live state cannot continue the prompt (docs/kv-cache.md, the decision
        order): it keeps what it can rewind to exactly; an in-memory checkpoint that
        keeps more is restored, and a disk checkpoint is loaded only when it holds more
        than either. The outgoing state is kept first (in memory and on disk).
        Returns the effective prompt, the source and the disk hit."""
        if self.session.pos > 0:
            self.trace(
                f"--- live kv cache miss --- live={self.session.pos} common={decision.common}"
            )
        # With bounded rewind history the common prefix may be out of the live state's
        # reach: compare what each candidate really keeps.
        reachable = self.session.reusable(decision.tokens)
        memory = None
        if self.mem is not None:
            memory = self.mem.best(self.session, decision.tokens, job.prompt_text)
            if memory is not None and memory.keep <= reachable:
                memory = None
        if self.mem is not None:
            self.mem.keep_live(self.session, "evict", self._bound_visible())
        hit = None
        if self.kv is not None:
            self.kv.save_evicted(self.session, self.live.disk_key(self.session.pos))
            best = max(reachable, memory.keep if memory is not None else 0)
            hit = self.kv.load(self.session, job.prompt_text, more_than=best)
        if hit is not None:
            return hit.tokens, "disk-text", hit
        if memory is not None and self.mem is not None:
            self.session.restore(memory.checkpoint)
            self.mem.taken(memory)
            self.trace(f"--- memory checkpoint --- kept={memory.keep} match={memory.match}")
            return memory.tokens, MEMORY_CHECKPOINT, None
        return decision.tokens, "none", None

    def _prompt_end(self) -> StateCheckpoint | None:
        """A copy of the state at the prompt's end, kept once the turn is over if the
        live state can no longer rewind to it (the retry of a long answer)."""
        if self.mem is None or not self.mem.worth_keeping(self.session.tokens):
            return None
        return self.session.checkpoint()

    def _keep_prompt_end(self, checkpoint: StateCheckpoint | None) -> None:
        if checkpoint is None or self.mem is None:
            return
        n = len(checkpoint.tokens)
        held = self.session.tokens
        still_there = len(held) >= n and tuple(held[:n]) == tuple(checkpoint.tokens)
        if still_there and self.session.rewind_floor(n) == n:
            return  # the live state still reaches it exactly
        self.mem.add(checkpoint, "prompt")

    def _prefill(
        self, prompt: tuple[int, ...], *, cold: bool, cancel: CancelCheck
    ) -> Generator[PrefillProgress, None, int]:
        """Bring the session to `prompt` (with the disk cache's saves); the reused count."""
        if self.kv is None:
            return (yield from prefill(self.session, prompt, cancel=cancel))
        return (yield from self.kv.prefill(self.session, prompt, cold=cold, cancel=cancel))

    # ---- decoding --------------------------------------------------------------

    def _decode(
        self,
        job: PreparedJob,
        prompt: tuple[int, ...],
        cached: int,
        cancel: CancelCheck,
        on_token: OnToken,
    ) -> Iterator[ServedEvent]:
        api: ToolApi = job.request.api.rules.tool_ids
        shown: list[str] = []
        settings = self.settings(job)
        for event in decode_turn(
            self.session,
            self.tokenizer,
            settings,
            prompt_tokens=len(prompt),
            cached=cached,
            cancel=cancel,
            on_token=self._on_token(job, on_token),
        ):
            if isinstance(event, ToolCallStarted):
                with self.memory_lock:
                    call_id = self.memory.new_id(api, shown)
                shown.append(call_id)
                self.trace(f"--- trace: tool call {event.index} {event.name} id={call_id} ---")
                yield ToolCallOpened(event.index, event.name, call_id)
            elif isinstance(event, Finished):
                self._warn_context_full(event, settings.max_tokens)
                finished = self._finish(event, api, shown)
                self.live.after_turn(self._turn_facts(job), finished)
                yield from self._canonicalize(job, finished, cancel)
                kept = self._keep_stored(job)
                yield finished
                if kept is not None and self.kv is not None:  # after the reply went out
                    self.kv.store(self.session, SaveReason.EVICT, self.session.pos, kept)
            else:
                yield event

    # ---- stored responses (docs/adr/0069-stored-responses.md) --------------------

    def _bound_visible(self) -> str | None:
        """The Responses visible transcript the live state is bound to, if any."""
        key = self.live.disk_key(self.session.pos)
        return key.text if key is not None and key.kind == RESPONSES_VISIBLE else None

    def _keep_stored(self, job: PreparedJob) -> DiskKey | None:
        """A stored Responses turn: a copy of the end state in memory now, keyed by its
        visible transcript (a continuation, or a second one from the same response,
        restores it once the live state moved on); returns the key of its disk save,
        which is written once the reply went out (None: nothing to save)."""
        visible = self._bound_visible() if job.request.keep_state else None
        if visible is None:
            return None
        if self.mem is not None:
            self.mem.keep_live(self.session, "stored", visible)
        return _visible_key(visible) if self.kv is not None else None

    def _warn_context_full(self, finished: Finished, max_tokens: int) -> None:
        """A reply cut short by the context, not by its max_tokens: say so, since the
        client only sees finish `length`."""
        if not cut_by_context(finished, max_tokens):
            return
        usage = finished.usage
        line = (
            f"reply stopped at the context limit: {usage.prompt_tokens} prompt + "
            f"{usage.completion_tokens} generated tokens of ctx {self.session.ctx} "
            f"(max_tokens {max_tokens}); a larger --ctx gives longer replies"
        )
        self.trace(f"--- {line} ---")
        self.warn(line)

    def _on_token(self, job: PreparedJob, caller: OnToken) -> OnToken:
        """After each decoded token: the caller's callback, then the disk cache's
        continued saves. The caller's goes first so that a token's time is when it
        was evaluated, not after a checkpoint write."""
        if self.kv is None:
            return caller
        saver = self.kv.continued_saver(self.session, tools_active=job.request.tools_active)
        if caller is ignore_token:
            return saver

        def both(token: int) -> None:
            caller(token)
            saver(token)

        return both

    def _finish(self, finished: Finished, api: ToolApi, shown: list[str]) -> Finished:
        self.trace(f"--- generated text ---\n{finished.text}")
        self.trace(
            f"--- parsed message --- finish={finished.finish} "
            f"tokens={finished.usage.completion_tokens} calls={len(finished.tool_calls)} "
            f"recovery={finished.recovery.value} error={finished.error}"
        )
        if not finished.tool_calls:
            return finished
        with self.memory_lock:
            calls = self.memory.assign_ids(finished.tool_calls, api, shown)
            self.memory.remember(calls, finished.raw_dsml)
        return replace(finished, tool_calls=calls)

    def _canonicalize(
        self, job: PreparedJob, finished: Finished, cancel: CancelCheck
    ) -> Iterator[PrefillProgress]:
        """docs/reference/server.md §6, before the reply goes out: only chat and Anthropic turns
        with calls the next request cannot replay exactly."""
        if not job.request.api.rules.canonicalizes_calls or finished.finish == "cancelled":
            return
        if not should_canonicalize(finished.tool_calls, finished.raw_dsml, self.memory.enabled):
            return
        rendered = job.prompt_text + checkpoint_suffix(finished, job.think_mode.thinking)
        outcome = yield from canonicalize_tool_checkpoint(
            self.session,
            self.tokenizer,
            rendered,
            len(job.prompt_tokens),
            disk_load=self._disk_load if self.kv is not None else None,
            trace=self.trace,
            cancel=cancel,
        )
        self.trace(f"--- tool checkpoint canonicalization {outcome.value} ---")

    def _disk_load(
        self, session: EngineSession, text: str, more_than: int
    ) -> tuple[int, ...] | None:
        hit = self.kv.load(session, text, more_than=more_than) if self.kv is not None else None
        return None if hit is None else hit.tokens

    def _turn_facts(self, job: PreparedJob) -> TurnFacts:
        request = job.request
        return TurnFacts(
            api=request.api,
            prompt_text=job.prompt_text,
            thinking=job.think_mode.thinking,
            tools_active=request.tools_active,
            preserves_reasoning=has_tool_context(request.messages, request.schemas),
            reasoning_summary=request.reasoning_summary,
            pos=self.session.pos,
        )


def _visible_key(visible: str) -> DiskKey:
    return DiskKey(visible, KvcFlags.RESPONSES_VISIBLE, RESPONSES_VISIBLE)


# ---- canonicalize ----------------------------------------------------------
# Post-tool-call canonicalization, the fallback of docs/reference/server.md §6.
#
# After a chat or Anthropic turn that produced tool calls, the live state holds the
# prompt plus the *sampled* tokens. When the next request cannot get the sampled DSML
# back by exact replay (replay disabled with --disable-exact-dsml-tool-replay, or the
# parse left no raw block), it renders the turn from the client's JSON instead, so the
# live state is rewritten to that canonical text before the reply goes out: then the
# next prompt continues the live tokens. Responses never runs it (docs/reference/server.md §5.3).
#
# Two choices differ from the reference snapshot, both noted in the tests:
# * the expected suffix renders the calls canonically even when a sampled block
#   exists (the snapshot used the sampled block [QUIRK], which is not what the next
#   prompt contains once replay is off);
# * a rebuild keeps the longest prefix the engine can rewind to exactly (loop.prefill)
#   instead of invalidating everything; the state it ends in is the same.

# Loads the longest disk checkpoint whose text prefixes `rendered` (more than
# `more_than` tokens) into the session; returns the tokens to sync to, or None.
DiskLoad = Callable[[EngineSession, str, int], tuple[int, ...] | None]


class CanonicalOutcome(Enum):
    ALIGNED = "aligned"  # the live state already is the canonical tokenization
    SAME_TEXT = "same-text"  # same bytes, other BPE split: the sampled state is kept
    SKIPPED = "skipped"  # the live state no longer holds the whole prompt
    EXTENDED = "extended"  # the canonical tokens continue the live ones
    REBUILT = "rebuilt"  # the live tail differed: rewound (or loaded) and re-prefilled
    CANCELLED = "cancelled"
    FAILED = "failed"


def should_canonicalize(
    calls: Sequence[ToolCall], raw_dsml: str | None, exact_replay: bool
) -> bool:
    """Calls exist and the next request cannot replay the sampled block."""
    return bool(calls) and (not exact_replay or not raw_dsml)


def requires_rebuild(live: int, canonical: int, common: int) -> bool:
    """The live tail differs from the canonical tokens (any inconsistent count too)."""
    if min(live, canonical, common) < 0 or common > live or common > canonical:
        return True
    return common < live


def checkpoint_suffix(finished: Finished, thinking: bool) -> str:
    """What the next prompt renders after this prompt for the turn: the reasoning is
    kept (a turn with calls is tool context), then the answer, the calls and EOS."""
    head = (finished.reasoning or "") + UNTHINK if thinking else ""
    return head + finished.content + render_tool_calls(finished.tool_calls) + EOS


def canonicalize_tool_checkpoint(
    session: EngineSession,
    tokenizer: Tokenizer,
    rendered: str,
    prompt_tokens: int,
    *,
    disk_load: DiskLoad | None = None,
    trace: Trace = lambda _line: None,
    cancel: CancelCheck = never_cancel,
) -> Generator[PrefillProgress, None, CanonicalOutcome]:
    """Rewrite the live state to tokenize(rendered) = prompt_text + checkpoint_suffix.

    Yields progress while it prefills (the HTTP layer only keeps the stream alive);
    never raises for an engine failure: the reply goes out whatever happens here.
    """
    canonical = tuple(tokenizer.encode(rendered))
    pos = session.pos
    common = session.common_prefix(canonical)
    if common == pos == len(canonical):
        return CanonicalOutcome.ALIGNED
    if tokenizer.decode(session.tokens) == rendered:
        return CanonicalOutcome.SAME_TEXT
    if common < prompt_tokens:
        trace(
            f"--- tool checkpoint canonicalization skipped: common={common} "
            f"< prompt={prompt_tokens} ---"
        )
        return CanonicalOutcome.SKIPPED
    target, outcome = canonical, CanonicalOutcome.EXTENDED
    try:
        if requires_rebuild(pos, len(canonical), common):
            outcome = CanonicalOutcome.REBUILT
            trace(
                f"--- tool checkpoint canonicalization needs {len(canonical) - common} tokens "
                f"rebuild live={pos} canonical={len(canonical)} common={common} ---"
            )
            loaded = disk_load(session, rendered, common) if disk_load is not None else None
            target = loaded if loaded is not None else canonical
        reused = yield from prefill(session, target, cancel=cancel)
    except CancelledError:
        trace("--- tool checkpoint canonicalization cancelled ---")
        return CanonicalOutcome.CANCELLED
    except Ds4Error as exc:
        trace(f"--- tool checkpoint canonicalization failed: {exc} ---")
        return CanonicalOutcome.FAILED
    if outcome is CanonicalOutcome.REBUILT:
        trace(
            f"--- tool checkpoint canonicalization rebuild done reused={reused} "
            f"evaluated={len(target) - reused} ---"
        )
    return outcome
