"""One job on the inference worker: cache decision, prefill, decode, tool ids.

Pure orchestration over the engine Session and the generation loop; the HTTP
adapter runs it on its single worker thread and maps the events per API.
Cache decision (server.md §6.2, live part): the engine keeps the longest common
token prefix; before that, when the live tokens' text is a byte prefix of the new
prompt but their tokens are not (the model sampled one token where the renderer's
tokenization has two), the live tokens are kept and only the rest is tokenized
("memory-text", §6.3).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace

from ds4.domain.api.generation_request import Api
from ds4.domain.api.served_events import PromptReady, ServedEvent, ToolCallOpened
from ds4.domain.engine.cancel import CancelCheck, CancelledError, never_cancel
from ds4.domain.engine.session import Session, common_prefix
from ds4.domain.generation.events import Finished, ToolCallStarted, Usage
from ds4.domain.generation.loop import TurnSettings, decode_turn, prefill
from ds4.domain.sampling.params import SamplingParams, seed_from_bytes
from ds4.domain.serving.prepare import PreparedJob
from ds4.domain.tools.replay_memory import ToolReplayMemory
from ds4.domain.tools.tool_ids import ToolApi
from ds4.ports.random_source import RandomSource
from ds4.ports.tokenizer import Tokenizer

# Thinking mode ignores the client's knobs (server.md §3.3).
THINKING_SAMPLING = SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.05)

Trace = Callable[[str], None]


def _no_trace(_line: str) -> None:
    return None


@dataclass(frozen=True)
class CacheDecision:
    tokens: tuple[int, ...]  # the effective prompt
    source: str  # "memory-token" | "memory-text" | "none"
    common: int  # longest common token prefix with the live state


def cache_decision(session: Session, job: PreparedJob, tokenizer: Tokenizer) -> CacheDecision:
    live = tuple(session.tokens)
    common = common_prefix(live, job.prompt_tokens)
    if live and common == len(live) and len(job.prompt_tokens) > len(live):
        return CacheDecision(job.prompt_tokens, "memory-token", common)
    if live:
        live_text = tokenizer.decode(live)
        if len(live_text) < len(job.prompt_text) and job.prompt_text.startswith(live_text):
            suffix = tokenizer.encode(job.prompt_text[len(live_text) :])
            return CacheDecision(live + tuple(suffix), "memory-text", len(live))
    return CacheDecision(job.prompt_tokens, "none", common)


@dataclass
class Worker:
    """What the single inference worker owns."""

    session: Session
    tokenizer: Tokenizer
    memory: ToolReplayMemory
    random: RandomSource
    default_max_tokens: int
    memory_lock: AbstractContextManager[object] = field(default_factory=contextlib.nullcontext)
    trace: Trace = _no_trace

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
        )

    def run(self, job: PreparedJob, *, cancel: CancelCheck = never_cancel) -> Iterator[ServedEvent]:
        """The job's events; the last is Finished (tool calls carrying their ids).

        Raises Ds4Error when the prompt cannot be prefilled (nothing was generated).
        """
        request = job.request
        self.trace(
            f"===== request api={request.api.value} model={request.model} "
            f"stream={request.stream} tools={len(request.schemas)} "
            f"think={job.think_mode.value} prompt_tokens={len(job.prompt_tokens)} ====="
        )
        self.trace(f"--- rendered prompt ---\n{job.prompt_text}")
        decision = cache_decision(self.session, job, self.tokenizer)
        self.trace(
            f"--- cache decision --- live={self.session.pos} prompt={len(job.prompt_tokens)} "
            f"common={decision.common} source={decision.source} "
            f"replay mem={job.replay.mem} disk={job.replay.disk} "
            f"canonical={job.replay.canonical} missing_ids={job.replay.missing_ids}"
        )
        prompt = decision.tokens
        try:
            cached = yield from prefill(self.session, prompt, cancel=cancel)
        except CancelledError:
            yield Finished("cancelled", "", None, (), Usage(len(prompt), 0, 0))
            return
        self.trace(f"--- prefill done --- cached={cached} evaluated={len(prompt) - cached}")
        yield PromptReady(len(prompt), cached)
        api: ToolApi = "anthropic" if job.request.api is Api.ANTHROPIC else "openai"
        shown: list[str] = []
        for event in decode_turn(
            self.session,
            self.tokenizer,
            self.settings(job),
            prompt_tokens=len(prompt),
            cached=cached,
            cancel=cancel,
        ):
            if isinstance(event, ToolCallStarted):
                with self.memory_lock:
                    call_id = self.memory.new_id(api, shown)
                shown.append(call_id)
                self.trace(f"--- trace: tool call {event.index} {event.name} id={call_id} ---")
                yield ToolCallOpened(event.index, event.name, call_id)
            elif isinstance(event, Finished):
                yield self._finish(event, api, shown)
            else:
                yield event

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
