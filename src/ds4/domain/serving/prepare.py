"""A parsed request to the prompt the worker will run (docs/reference/server.md §2.8, §1.4),
and the choices made with it: the certain-overflow bound, the cache decision (which
state the prompt continues from) and, with several slots, which slot it goes to.

Runs on the request side, concurrently with the worker: exact DSML replay from tool
memory (docs/reference/chat-and-dsml.md §4.3), rendering, tokenizing, and the context-length
pre-check, so a prompt that cannot fit is refused before it waits in the queue. Responses and
Anthropic tool results are checked against the request's own history and the live bindings'
ids (docs/reference/server.md §5.3, §5.4) and the live-continuation tail is prepared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ds4.domain.chat import ThinkMode, effective_think_mode, render_chat
from ds4.domain.constraints.turn import turn_grammar
from ds4.domain.engine.session import common_prefix
from ds4.domain.errors import ContextLengthError, ErrorKind, RequestError
from ds4.domain.serving.exchange import GenerationRequest, LiveTools
from ds4.domain.serving.live import (
    ANTHROPIC_TOOL_OUTPUT,
    NO_PLAN,
    RESPONSES_TOOL_OUTPUT,
    RESPONSES_VISIBLE,
    THINKING_VISIBLE,
    KnownIds,
    LiveBindings,
    LivePlan,
    plan_for,
    validate_tool_outputs,
    validate_tool_results,
)
from ds4.domain.tools import ReplayStats, ToolReplayMemory
from ds4.ports.constraint import ConstraintCompiler, TokenConstraint
from ds4.ports.tokenizer import Tokenizer


@dataclass(frozen=True)
class PreparedJob:
    request: GenerationRequest
    think_mode: ThinkMode  # effective (Think Max needs a 384 Ki context)
    prompt_text: str
    prompt_tokens: tuple[int, ...]
    replay: ReplayStats
    live: LivePlan = NO_PLAN
    constraint: TokenConstraint | None = None  # the reply's grammar, at its start


def compile_constraint(
    request: GenerationRequest, compiler: ConstraintCompiler | None, *, strict_tools: bool
) -> TokenConstraint | None:
    """The turn's grammar compiled (docs/structured-outputs.md); RequestError (a 400
    naming the field) when it cannot be, or when there is no compiler to build it."""
    grammar = turn_grammar(
        request.output_format, request.tool_choice, request.schemas, strict_all=strict_tools
    )
    if grammar is None:
        return None
    if compiler is None:
        raise RequestError(
            f"{grammar.param}: constrained decoding is not available here", param=grammar.param
        )
    return compiler.compile(grammar)


def live_plan(request: GenerationRequest, mode: ThinkMode, bindings: KnownIds | None) -> LivePlan:
    """Validate tool-result ids (RequestError) and prepare the live tail."""
    api, messages = request.api, request.messages
    known = bindings.known_ids(api) if bindings is not None else frozenset()
    reasoning = False
    live_tools = api.rules.live_tools
    if live_tools is LiveTools.TRANSCRIPT:
        live_state, reasoning = validate_tool_outputs(messages, known, mode.thinking)
    elif live_tools is LiveTools.CALL_IDS:
        live_state = validate_tool_results(messages, known)
    else:
        return NO_PLAN
    return plan_for(api, messages, mode, live_state=live_state, reasoning=reasoning)


def prepare_job(
    request: GenerationRequest,
    tokenizer: Tokenizer,
    memory: ToolReplayMemory,
    ctx: int,
    bindings: KnownIds | None = None,
    *,
    longest_token: int | None = None,
    compiler: ConstraintCompiler | None = None,
    strict_tools: bool = False,
) -> PreparedJob:
    """Render and tokenize; ContextLengthError when len >= ctx, RequestError when a
    tool result names a call neither replayed nor live. With `longest_token`
    (prompt_bound.longest_token_bytes), a prompt that certainly cannot fit is refused
    before it is tokenized.

    The caller serializes access to `memory` (attach reorders its LRU). The reply's
    grammar is compiled with `compiler` (GrammarError, a 400, when it cannot be);
    `strict_tools` makes every tool strict (`--strict-tools`)."""
    constraint = compile_constraint(request, compiler, strict_tools=strict_tools)
    if request.prompt_ids is not None:
        return _token_prompt(request, request.prompt_ids, tokenizer, ctx, constraint)
    mode = effective_think_mode(request.think_mode, ctx)
    plan = live_plan(request, mode, bindings)
    messages, stats = memory.attach(request.messages)
    text = render_chat(messages, request.schemas, mode)
    if longest_token is not None:
        refuse_certain_overflow(text, ctx, longest_token)
    tokens = tuple(tokenizer.encode(text))
    if len(tokens) >= ctx:
        raise ContextLengthError(len(tokens), ctx)
    return PreparedJob(request, mode, text, tokens, stats, plan, constraint)


def _token_prompt(
    request: GenerationRequest,
    ids: tuple[int, ...],
    tokenizer: Tokenizer,
    ctx: int,
    constraint: TokenConstraint | None,
) -> PreparedJob:
    """A token-id prompt (completions): the ids as they are, no template, no thinking;
    an id outside the vocabulary is a 400 naming `prompt`."""
    if not ids:
        raise RequestError("prompt: an empty token list", param="prompt")
    bad = next((i for i in ids if not 0 <= i < tokenizer.vocab_size), None)
    if bad is not None:
        raise RequestError(
            f"prompt: token id {bad} is not in the vocabulary (0..{tokenizer.vocab_size - 1})",
            param="prompt",
        )
    if len(ids) >= ctx:
        raise ContextLengthError(len(ids), ctx)
    text = tokenizer.decode(ids)
    return PreparedJob(request, ThinkMode.NONE, text, ids, ReplayStats(), constraint=constraint)


# ---- prompt bound ----------------------------------------------------------
# A prompt too long for the context, known without tokenizing it (ADR 0044).
#
# No token covers more than the vocabulary's longest token bytes, and a character is
# at least one byte, so a text of n characters has at least ceil(n / longest) tokens.
# Past ctx * longest characters the prompt cannot fit, and tokenizing it would only
# confirm that at a high price: the tokenizer needs about 30 bytes of memory per byte
# of text (a 60 MiB body took 2 GB) and seconds of CPU per 10 MiB.


def longest_token_bytes(tokenizer: Tokenizer) -> int:
    """The most bytes one token stands for (128 in DeepSeek V4's vocabulary)."""
    return max((len(tokenizer.token_bytes(i)) for i in range(tokenizer.vocab_size)), default=1)


def tokens_at_least(text: str, longest_token: int) -> int:
    return -(-len(text) // max(longest_token, 1))


def refuse_certain_overflow(text: str, ctx: int, longest_token: int) -> None:
    """ContextLengthError, with the token count's lower bound, for a text too long for
    `ctx` whatever its tokens."""
    least = tokens_at_least(text, longest_token)
    if least >= ctx:
        raise ContextLengthError(least, ctx, lower_bound=True)


# ---- decision --------------------------------------------------------------
# Which live state a prompt continues from (docs/reference/server.md §4.2, §5).
#
# In order: the Responses visible-prefix binding, the Responses tool-output ids, the
# Anthropic tool-output ids (a conflict when the request needs one of those and it is gone),
# the live tokens as an exact prefix ("memory-token"), the tool-less thinking binding
# ("thinking-visible"), the live text as a byte prefix ("memory-text"); else "none"
# (the worker then tries the disk). A continuation is the live tokens plus the
# rendered-chat tokenization of only the suffix text, tokenized after the decision.

RESPONSES_GONE = (
    "Responses continuation state is not available; retry by replaying the full input history"
)
ANTHROPIC_GONE = (
    "Anthropic continuation state is not available; retry by replaying the full messages history"
)


@dataclass(frozen=True)
class CacheDecision:
    tokens: tuple[int, ...]  # the effective prompt
    source: str  # a binding source, "memory-token", "memory-text" or "none"
    common: int  # longest common token prefix with the live state
    note: str = ""  # the live-continuation log line, if a binding matched


def cache_decision(
    live: Sequence[int], job: PreparedJob, tokenizer: Tokenizer, bindings: LiveBindings
) -> CacheDecision:
    """Raises RequestError (CONFLICT) when the request needs live tool state that is gone."""
    live = tuple(live)
    pos = len(live)
    prompt_text = job.prompt_text
    common = common_prefix(live, job.prompt_tokens)
    plan, api = job.live, job.request.api

    def continue_with(suffix: str, source: str, note: str) -> CacheDecision:
        tokens = live + tuple(tokenizer.encode(suffix) if suffix else ())
        line = f"{note} cached={pos} prompt={len(tokens)}"
        return CacheDecision(tokens, source, pos, line)

    live_tools = api.rules.live_tools
    responses = bindings.responses if live_tools is LiveTools.TRANSCRIPT else None
    if responses is not None and responses.at(pos):
        suffix = responses.visible_prefix(prompt_text)
        if suffix is not None:
            ids = len(plan.call_ids) if responses.ids_match(plan.call_ids) else 0
            note = f"responses live continuation RESPPROTO match=visible-prefix ids={ids}"
            return continue_with(suffix, RESPONSES_VISIBLE, note)
        if responses.ids_match(plan.call_ids):
            note = (
                "responses live continuation RESPPROTO match=tool-output-ids "
                f"ids={len(plan.call_ids)}"
            )
            return continue_with(plan.suffix, RESPONSES_TOOL_OUTPUT, note)
    anthropic = bindings.anthropic if live_tools is LiveTools.CALL_IDS else None
    if anthropic is not None and anthropic.at(pos) and anthropic.ids_match(plan.call_ids):
        note = f"anthropic live continuation match=tool-output-ids ids={len(plan.call_ids)}"
        return continue_with(plan.suffix, ANTHROPIC_TOOL_OUTPUT, note)
    if plan.requires_live_tool_state and live_tools is LiveTools.TRANSCRIPT:
        raise RequestError(RESPONSES_GONE, ErrorKind.CONFLICT)
    if plan.requires_live_tool_state and live_tools is LiveTools.CALL_IDS:
        raise RequestError(ANTHROPIC_GONE, ErrorKind.CONFLICT)
    if live and common == pos and len(job.prompt_tokens) >= pos:
        return CacheDecision(job.prompt_tokens, "memory-token", common)
    thinking = bindings.thinking if api.rules.thinking_continuation else None
    if thinking is not None and thinking.at(pos):
        suffix = thinking.visible_prefix(prompt_text)
        if suffix is not None:
            note = "thinking live continuation match=visible-prefix"
            return continue_with(suffix, THINKING_VISIBLE, note)
    if live:
        live_text = tokenizer.decode(live)
        if len(live_text) < len(prompt_text) and prompt_text.startswith(live_text):
            suffix_tokens = tokenizer.encode(prompt_text[len(live_text) :])
            return CacheDecision(live + tuple(suffix_tokens), "memory-text", pos)
    return CacheDecision(job.prompt_tokens, "none", common)


# ---- slot choice -----------------------------------------------------------
# Which idle slot a request goes to when the server keeps several live sessions.
#
# A slot is one live session with its own bindings (`--sessions N`, ADR 0045). A request
# continues a slot when it would keep at least half of that slot's live state (what the
# cache decision and the session's exact rewind floors would keep); among those it goes
# to the one it keeps the most of, so a conversation comes back to the state it left.
# Keeping less than half means another conversation that only shares an opening (a
# system prompt, the tool list): it goes elsewhere, so both conversations stay live (the
# disk cache's cold save at the chat anchor serves the shared opening). Otherwise the
# request takes an empty slot, else the one used least recently: the stalest
# conversation is the one evicted.

NEVER_USED = -1


@dataclass(frozen=True)
class SlotCandidate:
    slot: int
    live: int  # tokens in the slot's live state
    reusable: int  # of those, what the request would keep
    last_used: int  # when its last job ended, as a count of ended jobs (NEVER_USED: none)

    @property
    def continued(self) -> bool:
        """The request continues this slot's conversation, not just its opening."""
        return self.reusable > 0 and 2 * self.reusable >= self.live


def choose_slot(candidates: Sequence[SlotCandidate]) -> int:
    """The slot for one request among the idle ones (at least one)."""
    if not candidates:
        raise ValueError("no idle slot to choose from")
    continued = [c for c in candidates if c.continued]
    if continued:
        return min(continued, key=lambda c: (-c.reusable, c.last_used, c.slot)).slot
    return min(candidates, key=lambda c: (c.live > 0, c.last_used, c.slot)).slot


class SlotLedger:
    """When each slot last ended a job: a counter, not a clock, so the order is exact."""

    def __init__(self, slots: int) -> None:
        self._last_used = [NEVER_USED] * slots
        self._ended = 0

    def last_used(self, slot: int) -> int:
        return self._last_used[slot]

    def ended(self, slot: int) -> None:
        self._ended += 1
        self._last_used[slot] = self._ended
