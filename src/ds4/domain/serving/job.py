"""One job on the inference worker: cache decision, prefill, decode, tool ids.

Pure orchestration over the engine Session and the generation loop; the HTTP
adapter runs it on its single worker thread and maps the events per API.
Cache decision (docs/reference/server.md §4.2, serving.decision): the live bindings of
docs/reference/server.md §5 (Responses visible transcript and call ids, Anthropic tool_use ids, the
tool-less thinking transcript), the live tokens as a prefix ("memory-token"), the live text as
a byte prefix ("memory-text"); otherwise, with a disk cache, the outgoing state is
saved ("evict", keyed by its visible transcript when bound) and the longest stored
text prefix is loaded ("disk-text"); else the engine keeps the longest common token
prefix it can and a "cold" checkpoint may be cut (docs/reference/server.md §4.4). Continued
checkpoints are written at aligned frontiers while prefilling and, through the decode loop's
per-token callback, while decoding (docs/reference/server.md §4.5); shutdown saves the live state.
After a successful prefill the bindings the job did not continue from are dropped; after the
turn they are remembered or cleared (docs/reference/server.md §4.8), and a chat or Anthropic turn
whose calls cannot be replayed exactly has its live state rewritten to the canonical rendering
before the reply goes out (docs/reference/server.md §6, serving.canonicalize).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace

from ds4.domain.chat.renderer import has_tool_context
from ds4.domain.engine.cancel import CancelCheck, CancelledError, never_cancel
from ds4.domain.engine.session import Session
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import Finished, PrefillProgress, ToolCallStarted, Usage
from ds4.domain.generation.loop import (
    OnToken,
    TurnSettings,
    decode_turn,
    ignore_token,
    prefill,
)
from ds4.domain.kvcache.kvc_header import KvcFlags
from ds4.domain.sampling.params import SamplingParams, seed_from_bytes
from ds4.domain.serving.canonicalize import (
    canonicalize_tool_checkpoint,
    checkpoint_suffix,
    should_canonicalize,
)
from ds4.domain.serving.decision import CacheDecision, cache_decision
from ds4.domain.serving.generation_request import Api
from ds4.domain.serving.kv_checkpoints import DiskHit, KvCheckpoints
from ds4.domain.serving.live_bindings import (
    RESPONSES_TOOL_OUTPUT,
    RESPONSES_VISIBLE,
    LiveBindings,
    TurnFacts,
)
from ds4.domain.serving.prepare import PreparedJob
from ds4.domain.serving.served_events import PromptReady, ServedEvent, ToolCallOpened
from ds4.domain.tools.replay_memory import ToolReplayMemory
from ds4.domain.tools.tool_ids import ToolApi
from ds4.ports.random_source import RandomSource
from ds4.ports.tokenizer import Tokenizer

# Thinking mode ignores the client's knobs (docs/reference/server.md §2.3).
THINKING_SAMPLING = SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.05)

Trace = Callable[[str], None]


def _no_trace(_line: str) -> None:
    return None


@dataclass
class Worker:
    """What one inference worker owns: a live session and what lives next to it (the
    server runs one, or one per slot with `--sessions N`)."""

    session: Session
    tokenizer: Tokenizer
    memory: ToolReplayMemory
    random: RandomSource
    default_max_tokens: int
    memory_lock: AbstractContextManager[object] = field(default_factory=contextlib.nullcontext)
    trace: Trace = _no_trace
    kv: KvCheckpoints | None = None  # the disk KV cache (None: disabled)
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
        live = self.session.pos
        try:
            decision = cache_decision(self.session.tokens, job, self.tokenizer, self.live)
        except Ds4Error as exc:
            self.trace(f"--- cache decision --- live={live} refused: {exc}")
            raise
        if decision.note:
            self.trace(f"--- {decision.note} ---")
        prompt, source, hit = decision.tokens, decision.source, self._disk_lookup(job, decision)
        if hit is not None:
            prompt, source = hit.tokens, "disk-text"
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
        yield PromptReady(len(prompt), cached, source)
        yield from self._decode(job, prompt, cached, cancel, on_token)

    def reusable(self, job: PreparedJob) -> int:
        """Live tokens this job would keep if it ran here (the slot choice of ADR 0045);
        nothing changes. A job this worker would refuse (live tool state gone) keeps none."""
        try:
            decision = cache_decision(self.session.tokens, job, self.tokenizer, self.live)
        except Ds4Error:
            return 0
        return self.session.reusable(decision.tokens)

    def shutdown(self) -> None:
        """Clean exit: save the live state (reason `shutdown`); on the worker thread."""
        if self.kv is not None:
            self.kv.save_at_shutdown(self.session, self.live.disk_key(self.session.pos))

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

    # ---- disk cache ------------------------------------------------------------

    def _disk_lookup(self, job: PreparedJob, decision: CacheDecision) -> DiskHit | None:
        """On a live miss: save the outgoing state, then load the best disk prefix."""
        if decision.source != "none":
            return None
        if self.session.pos > 0:
            self.trace(
                f"--- live kv cache miss --- live={self.session.pos} common={decision.common}"
            )
        if self.kv is None:
            return None
        # A checkpoint pays when it holds more than the live state can really keep: the
        # common prefix may lie below what its bounded history rewinds to exactly.
        reachable = self.session.reusable(decision.tokens)
        self.kv.save_evicted(self.session, self.live.disk_key(self.session.pos))
        return self.kv.load(self.session, job.prompt_text, more_than=reachable)

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
        api: ToolApi = "anthropic" if job.request.api is Api.ANTHROPIC else "openai"
        shown: list[str] = []
        for event in decode_turn(
            self.session,
            self.tokenizer,
            self.settings(job),
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
                finished = self._finish(event, api, shown)
                self.live.after_turn(self._turn_facts(job), finished)
                yield from self._canonicalize(job, finished, cancel)
                yield finished
            else:
                yield event

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
        if job.request.api not in (Api.CHAT, Api.ANTHROPIC) or finished.finish == "cancelled":
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

    def _disk_load(self, session: Session, text: str, more_than: int) -> tuple[int, ...] | None:
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
