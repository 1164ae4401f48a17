"""Live continuation (docs/reference/server.md §5, §4.1): the three live bindings kept
next to the session, the tail a tool-output request appends to the live state, and
the check of tool results against the history and the bindings' ids.

The bindings: each names the live state by its token count (it matches only while the session
sits exactly there) and carries what a client will send back instead of the hidden
state: the Responses binding the visible transcript and the generated call ids, the
Anthropic binding the call ids, the thinking binding the visible transcript of a
tool-less thinking turn. The worker replaces the values whole, so a request thread
reading the known ids (parse-time validation) never sees half an update.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from ds4.domain.chat import (
    EOS,
    THINK,
    UNTHINK,
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkMode,
    ToolResultMessage,
    UserMessage,
    render_continuation_tail,
)
from ds4.domain.dsml.syntax import ToolCall, render_tool_calls
from ds4.domain.errors import RequestError
from ds4.domain.generation.events import Finished
from ds4.domain.kvcache.kv_file import KvcFlags
from ds4.domain.serving.exchange import Api, LiveTools

RESPONSES_VISIBLE = "responses-visible"
RESPONSES_TOOL_OUTPUT = "responses-tool-output"
ANTHROPIC_TOOL_OUTPUT = "anthropic-tool-output"
THINKING_VISIBLE = "thinking-visible"
_FAILED = frozenset({"error", "length", "cancelled"})


@dataclass(frozen=True)
class Binding:
    live_tokens: int  # the session position it names
    visible: str = ""  # the visible transcript ("" for Anthropic)
    call_ids: frozenset[str] = frozenset()

    def at(self, pos: int) -> bool:
        return pos > 0 and self.live_tokens == pos

    def ids_match(self, ids: Collection[str]) -> bool:
        """Same number of ids and every one present."""
        return bool(ids) and len(ids) == len(self.call_ids) and all(i in self.call_ids for i in ids)

    def visible_prefix(self, prompt_text: str) -> str | None:
        """What the live state lacks of `prompt_text` when the visible transcript
        prefixes it (its final EOS, then the rest), or None."""
        visible = self.visible
        if visible and len(visible) < len(prompt_text) and prompt_text.startswith(visible):
            return after_visible(visible, prompt_text)
        return None


def after_visible(visible: str, prompt_text: str) -> str:
    """The text a state named by `visible` lacks of `prompt_text` (which starts with it).

    A visible transcript ends with the turn's EOS, which was sampled but never evaluated
    into the state (docs/reference/server.md §5.3): the state holds the transcript but
    that EOS, so the suffix to evaluate starts with it. Without this the continued
    prompt would lose the EOS a full replay renders, and answer otherwise."""
    start = len(visible) - len(EOS) if visible.endswith(EOS) else len(visible)
    return prompt_text[start:]


@dataclass(frozen=True)
class DiskKey:
    text: str
    flags: KvcFlags
    kind: str


@dataclass(frozen=True)
class TurnFacts:
    """What post-processing needs to know about the turn that just ended."""

    api: Api
    prompt_text: str
    thinking: bool
    tools_active: bool
    preserves_reasoning: bool  # the prompt has tool context (docs/reference/chat-and-dsml.md §2.3)
    reasoning_summary: bool
    pos: int  # the session position after decoding


class LiveBindings:
    def __init__(self) -> None:
        self.responses: Binding | None = None
        self.anthropic: Binding | None = None
        self.thinking: Binding | None = None

    def known_ids(self, api: Api) -> frozenset[str]:
        """Call ids a client may send without replaying the call (parse-time check)."""
        binding = self.tool_binding(api.rules.live_tools)
        return frozenset() if binding is None else binding.call_ids

    def tool_binding(self, live_tools: LiveTools | None) -> Binding | None:
        """The binding that holds this kind of live tool state (None: no kind)."""
        if live_tools is LiveTools.TRANSCRIPT:
            return self.responses
        if live_tools is LiveTools.CALL_IDS:
            return self.anthropic
        return None

    def keep_only(self, source: str) -> None:
        """After a successful prefill: drop every binding this request did not continue."""
        if source not in (RESPONSES_VISIBLE, RESPONSES_TOOL_OUTPUT):
            self.responses = None
        if source != ANTHROPIC_TOOL_OUTPUT:
            self.anthropic = None
        if source != THINKING_VISIBLE:
            self.thinking = None

    def disk_key(self, pos: int) -> DiskKey | None:
        """The key of an evict/shutdown save: a visible transcript bound at `pos`."""
        if self.responses is not None and self.responses.at(pos) and self.responses.visible:
            return DiskKey(self.responses.visible, KvcFlags.RESPONSES_VISIBLE, RESPONSES_VISIBLE)
        if self.thinking is not None and self.thinking.at(pos) and self.thinking.visible:
            return DiskKey(self.thinking.visible, KvcFlags.THINKING_VISIBLE, THINKING_VISIBLE)
        return None

    def after_turn(self, turn: TurnFacts, finished: Finished) -> None:
        """Post-processing (docs/reference/server.md §4.8): remember or clear each binding."""
        ok = finished.finish not in _FAILED and turn.pos > 0
        calls = finished.tool_calls
        ids = frozenset(c.id for c in calls if c.id)
        live_tools = turn.api.rules.live_tools
        if live_tools is LiveTools.TRANSCRIPT:
            self.responses = (
                Binding(turn.pos, responses_visible(turn, finished), ids) if ok else None
            )
        if live_tools is LiveTools.CALL_IDS:
            self.anthropic = Binding(turn.pos, "", ids) if ok and calls else None
        self.thinking = None
        if not calls and thinking_gate(turn, finished):
            visible = thinking_visible(turn.prompt_text, finished.content)
            if visible is not None:
                self.thinking = Binding(turn.pos, visible)


class KnownIds(Protocol):
    """What request preparation checks tool results against (prepare.live_plan)."""

    def known_ids(self, api: Api) -> frozenset[str]: ...


class EverySlotBindings:
    """The known ids of several slots' bindings (`--sessions N`): a tool result may name
    a call any slot still holds; the slot choice then sends the request to that slot."""

    def __init__(self, each: Sequence[LiveBindings]) -> None:
        self._each = tuple(each)

    def known_ids(self, api: Api) -> frozenset[str]:
        return frozenset().union(*(bindings.known_ids(api) for bindings in self._each))


def _calls_dsml(calls: Sequence[ToolCall], raw_dsml: str | None) -> str:
    return (raw_dsml or render_tool_calls(calls)) if calls else ""


def responses_suffix(turn: TurnFacts, finished: Finished) -> str:
    """What a client replays after the prompt (docs/reference/server.md §5.3): reasoning only with
    summaries and calls, then the answer, the sampled DSML and EOS."""
    calls = finished.tool_calls
    head = ""
    if turn.thinking:
        reasoning = (finished.reasoning or "") if turn.reasoning_summary and calls else ""
        head = reasoning + UNTHINK
    return head + finished.content + _calls_dsml(calls, finished.raw_dsml) + EOS


def responses_visible(turn: TurnFacts, finished: Finished) -> str:
    """The transcript a Responses client's next request renders for this turn: the
    prompt and responses_suffix; but a thinking turn without calls and without tool
    context is rendered as earlier turns are, its thinking dropped (thinking_visible:
    `</think>` right after the assistant prefix), so that is what a replay, or a
    previous_response_id continuation, starts with (docs/adr/0069-stored-responses.md)."""
    if turn.thinking and not turn.preserves_reasoning and not finished.tool_calls:
        visible = thinking_visible(turn.prompt_text, finished.content)
        if visible is not None:
            return visible
    return turn.prompt_text + responses_suffix(turn, finished)


def thinking_gate(turn: TurnFacts, finished: Finished) -> bool:
    """docs/reference/server.md §5.5: a chat-kind thinking turn without tool context that closed its
    thinking."""
    text = turn.prompt_text + finished.text
    outside = text.rfind(UNTHINK) >= text.rfind(THINK)
    return (
        turn.api.rules.thinking_continuation
        and not turn.tools_active
        and not turn.preserves_reasoning
        and turn.thinking
        and finished.finish not in _FAILED
        and turn.pos > 0
        and outside
    )


def thinking_visible(prompt_text: str, content: str) -> str | None:
    if not prompt_text.endswith(THINK):
        return None
    return prompt_text[: -len(THINK)] + UNTHINK + content + EOS


# ---- live tail -------------------------------------------------------------
# Preparing a tool-output request for live continuation (docs/reference/server.md §5.3, §5.4).
#
# The tail is what the client sent after the turn the live state ended with: the
# trailing tool results. Its rendered text (EOS, the results, the assistant prefix)
# is the suffix appended to the live tokens when the request's ids select the live
# binding; the ids are what must match.


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
    live_tools = api.rules.live_tools
    if live_tools is LiveTools.TRANSCRIPT:
        ids, suffix = responses_tail(messages, mode)
    elif live_tools is LiveTools.CALL_IDS:
        ids, suffix = anthropic_tail(messages, mode)
    else:
        return NO_PLAN
    return LivePlan(ids, suffix, live_state, reasoning and live_tools is LiveTools.TRANSCRIPT)


# ---- tool results ----------------------------------------------------------
# Tool results must answer a call the server can see (docs/reference/server.md §5.3,
# §5.4): one replayed earlier in the same request, or one the live state holds.
#
# A result for a call neither replayed nor live is refused (the client must replay the
# full history); one for a live-only call makes the request depend on the live tool
# state, which the worker then continues (prepare.cache_decision) or refuses as gone.


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
