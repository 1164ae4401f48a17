"""Tool results must answer a call the server can see (docs/reference/server.md §5.3,
§5.4): one replayed earlier in the same request, or one the live state holds.

A result for a call neither replayed nor live is refused (the client must replay the
full history); one for a live-only call makes the request depend on the live tool
state, which the worker then continues (serving.decision) or refuses as gone.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ds4.domain.chat import AssistantMessage, Message, ToolResultMessage
from ds4.domain.errors import RequestError


def validate_tool_outputs(
    messages: Sequence[Message], live_ids: Collection[str], thinking: bool
) -> tuple[bool, bool]:
    """Responses: every tool output's call_id must be live-known or replayed earlier;
    returns (requires_live_tool_state, requires_live_reasoning), else RequestError."""
    calls: dict[str, AssistantMessage] = {}
    live_state = live_reasoning = False
    for message in messages:
        if isinstance(message, AssistantMessage):
            calls.update((call.id, message) for call in message.tool_calls if call.id)
        elif isinstance(message, ToolResultMessage) and message.tool_call_id:
            tool_id = message.tool_call_id
            prior = calls.get(tool_id)
            if prior is not None:
                live_reasoning |= thinking and not prior.reasoning
            elif tool_id in live_ids:
                live_state = True
            else:
                raise RequestError(
                    f"Responses continuation state is not available for call_id {tool_id}; "
                    "retry by replaying the full input history"
                )
    return live_state, live_reasoning


def validate_tool_results(messages: Sequence[Message], live_ids: Collection[str]) -> bool:
    """Anthropic: every tool_result's tool_use_id must be live-known or have a tool_use
    earlier in the request; True when a live-only id requires live tool state."""
    replayed: set[str] = set()
    live_state = False
    for message in messages:
        if isinstance(message, AssistantMessage):
            replayed.update(call.id for call in message.tool_calls if call.id)
        elif isinstance(message, ToolResultMessage) and message.tool_call_id:
            tool_id = message.tool_call_id
            if tool_id in replayed:
                continue
            if tool_id not in live_ids:
                raise RequestError(
                    f"Anthropic continuation state is not available for tool_use_id {tool_id}; "
                    "retry by replaying the full messages history"
                )
            live_state = True
    return live_state
