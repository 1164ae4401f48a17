"""Which live state a prompt continues from (docs/reference/server.md §4.2, §5).

In order: the Responses visible-prefix binding, the Responses tool-output ids, the
Anthropic tool-output ids (a conflict when the request needs one of those and it is gone),
the live tokens as an exact prefix ("memory-token"), the tool-less thinking binding
("thinking-visible"), the live text as a byte prefix ("memory-text"); else "none"
(the worker then tries the disk). A continuation is the live tokens plus the
rendered-chat tokenization of only the suffix text, tokenized after the decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ds4.domain.engine.session import common_prefix
from ds4.domain.errors import ErrorKind, RequestError
from ds4.domain.serving.generation_request import Api
from ds4.domain.serving.live_bindings import (
    ANTHROPIC_TOOL_OUTPUT,
    RESPONSES_TOOL_OUTPUT,
    RESPONSES_VISIBLE,
    THINKING_VISIBLE,
    LiveBindings,
)
from ds4.domain.serving.prepare import PreparedJob
from ds4.ports.tokenizer import Tokenizer

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

    responses = bindings.responses if api is Api.RESPONSES else None
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
    anthropic = bindings.anthropic if api is Api.ANTHROPIC else None
    if anthropic is not None and anthropic.at(pos) and anthropic.ids_match(plan.call_ids):
        note = f"anthropic live continuation match=tool-output-ids ids={len(plan.call_ids)}"
        return continue_with(plan.suffix, ANTHROPIC_TOOL_OUTPUT, note)
    if plan.requires_live_tool_state and api is Api.RESPONSES:
        raise RequestError(RESPONSES_GONE, ErrorKind.CONFLICT)
    if plan.requires_live_tool_state and api is Api.ANTHROPIC:
        raise RequestError(ANTHROPIC_GONE, ErrorKind.CONFLICT)
    if live and common == pos and len(job.prompt_tokens) >= pos:
        return CacheDecision(job.prompt_tokens, "memory-token", common)
    thinking = bindings.thinking if api in (Api.CHAT, Api.ANTHROPIC) else None
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
