"""Preparing a tool-output request for live continuation (docs/reference/server.md §5.3, §5.4).

The tail is what the client sent after the turn the live state ended with: the
trailing tool results. Its rendered text (EOS, the results, the assistant prefix)
is the suffix appended to the live tokens when the request's ids select the live
binding; the ids are what must match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ds4.domain.chat import (
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkMode,
    ToolResultMessage,
    UserMessage,
    render_continuation_tail,
)
from ds4.domain.serving.generation_request import Api


@dataclass(frozen=True)
class LivePlan:
    """A request's live-continuation evidence, found at parse time."""

    call_ids: tuple[str, ...] = ()  # ids that select the live binding (empty: none)
    suffix: str = ""  # the rendered tail appended to the live tokens
    requires_live_tool_state: bool = False  # results for live ids whose calls were not replayed
    requires_live_reasoning: bool = False  # Responses: a replayed call lost its reasoning


NO_PLAN = LivePlan()


def render_live_tail(messages: Sequence[Message], start: int, mode: ThinkMode) -> str:
    """EOS + messages[start:] (system-like skipped, reasoning kept) + assistant prefix."""
    return render_continuation_tail(messages[start:], mode)


def responses_tail(messages: Sequence[Message], mode: ThinkMode) -> tuple[tuple[str, ...], str]:
    """The ids and suffix of a Responses tool-output tail (docs/reference/server.md §5.3); ((), "")
    if none."""
    start = len(messages)
    while start > 0 and isinstance(messages[start - 1], ToolResultMessage):
        start -= 1
    if start == len(messages):
        return (), ""
    if start > 0:
        previous = messages[start - 1]
        if not isinstance(previous, AssistantMessage) or not previous.tool_calls:
            return (), ""
        ids = tuple(c.id for c in previous.tool_calls)
    else:
        ids = tuple(_result_ids(messages))
    return ids, render_live_tail(messages, start, mode)


def anthropic_tail(messages: Sequence[Message], mode: ThinkMode) -> tuple[tuple[str, ...], str]:
    """The ids and suffix of an Anthropic tool-result tail (docs/reference/server.md §5.4); ((), "")
    if none.

    The system prompt is appended last, so trailing system messages are skipped; a
    user turn's text after its results belongs to that turn (it parses into a user
    message right after the results)."""
    end = len(messages)
    while end > 0 and isinstance(messages[end - 1], SystemMessage):
        end -= 1
    start = end
    while start > 0:
        message = messages[start - 1]
        result = isinstance(message, ToolResultMessage) and bool(message.tool_call_id)
        turn_text = isinstance(message, UserMessage) and (
            start >= 2 and isinstance(messages[start - 2], ToolResultMessage)
        )
        if not (result or turn_text):
            break
        start -= 1
    ids = tuple(_result_ids(messages[start:end]))
    if not ids:
        return (), ""
    return ids, render_live_tail(messages, start, mode)


def _result_ids(messages: Sequence[Message]) -> list[str]:
    return [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage) and m.tool_call_id]


def plan_for(
    api: Api, messages: Sequence[Message], mode: ThinkMode, *, live_state: bool, reasoning: bool
) -> LivePlan:
    """The plan of a validated request (`live_state`/`reasoning`: the validation flags)."""
    if api is Api.RESPONSES:
        ids, suffix = responses_tail(messages, mode)
    elif api is Api.ANTHROPIC:
        ids, suffix = anthropic_tail(messages, mode)
    else:
        return NO_PLAN
    return LivePlan(ids, suffix, live_state, reasoning and api is Api.RESPONSES)
