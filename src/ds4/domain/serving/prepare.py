"""A parsed request to the prompt the worker will run (docs/reference/server.md §2.8, §1.4).

Runs on the request side, concurrently with the worker: exact DSML replay from tool
memory (docs/reference/chat-and-dsml.md §4.3), rendering, tokenizing, and the context-length
pre-check, so a prompt that cannot fit is refused before it waits in the queue. Responses and
Anthropic tool results are checked against the request's own history and the live bindings'
ids (docs/reference/server.md §5.3, §5.4) and the live-continuation tail is prepared.
"""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.chat import ThinkMode, effective_think_mode, render_chat
from ds4.domain.errors import ContextLengthError
from ds4.domain.serving.generation_request import Api, GenerationRequest
from ds4.domain.serving.live_bindings import KnownIds
from ds4.domain.serving.live_tail import NO_PLAN, LivePlan, plan_for
from ds4.domain.serving.prompt_bound import refuse_certain_overflow
from ds4.domain.serving.tool_results import validate_tool_outputs, validate_tool_results
from ds4.domain.tools import ReplayStats, ToolReplayMemory
from ds4.ports.tokenizer import Tokenizer


@dataclass(frozen=True)
class PreparedJob:
    request: GenerationRequest
    think_mode: ThinkMode  # effective (Think Max needs a 384 Ki context)
    prompt_text: str
    prompt_tokens: tuple[int, ...]
    replay: ReplayStats
    live: LivePlan = NO_PLAN


def live_plan(request: GenerationRequest, mode: ThinkMode, bindings: KnownIds | None) -> LivePlan:
    """Validate tool-result ids (RequestError) and prepare the live tail."""
    api, messages = request.api, request.messages
    known = bindings.known_ids(api) if bindings is not None else frozenset()
    reasoning = False
    if api is Api.RESPONSES:
        live_state, reasoning = validate_tool_outputs(messages, known, mode.thinking)
    elif api is Api.ANTHROPIC:
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
) -> PreparedJob:
    """Render and tokenize; ContextLengthError when len >= ctx, RequestError when a
    tool result names a call neither replayed nor live. With `longest_token`
    (prompt_bound.longest_token_bytes), a prompt that certainly cannot fit is refused
    before it is tokenized.

    The caller serializes access to `memory` (attach reorders its LRU)."""
    mode = effective_think_mode(request.think_mode, ctx)
    plan = live_plan(request, mode, bindings)
    messages, stats = memory.attach(request.messages)
    text = render_chat(messages, request.schemas, mode)
    if longest_token is not None:
        refuse_certain_overflow(text, ctx, longest_token)
    tokens = tuple(tokenizer.encode(text))
    if len(tokens) >= ctx:
        raise ContextLengthError(len(tokens), ctx)
    return PreparedJob(request, mode, text, tokens, stats, plan)
