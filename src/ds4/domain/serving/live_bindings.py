"""The three live bindings kept next to the session (docs/reference/server.md §5, §4.1).

Each names the live state by its token count (it matches only while the session
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

from ds4.domain.chat import EOS, THINK, UNTHINK
from ds4.domain.dsml.syntax import ToolCall, render_tool_calls
from ds4.domain.generation.events import Finished
from ds4.domain.kvcache.kv_file import KvcFlags
from ds4.domain.serving.generation_request import Api

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
        """The rest of `prompt_text` after the visible transcript, or None."""
        visible = self.visible
        if visible and len(visible) < len(prompt_text) and prompt_text.startswith(visible):
            return prompt_text[len(visible) :]
        return None


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
        binding = self.responses if api is Api.RESPONSES else self.anthropic
        if api not in (Api.RESPONSES, Api.ANTHROPIC) or binding is None:
            return frozenset()
        return binding.call_ids

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
        if turn.api is Api.RESPONSES:
            self.responses = (
                Binding(turn.pos, turn.prompt_text + responses_suffix(turn, finished), ids)
                if ok
                else None
            )
        if turn.api is Api.ANTHROPIC:
            self.anthropic = Binding(turn.pos, "", ids) if ok and calls else None
        self.thinking = None
        if not calls and turn.api is not Api.RESPONSES and thinking_gate(turn, finished):
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


def thinking_gate(turn: TurnFacts, finished: Finished) -> bool:
    """docs/reference/server.md §5.5: a chat-kind thinking turn without tool context that closed its
    thinking."""
    text = turn.prompt_text + finished.text
    outside = text.rfind(UNTHINK) >= text.rfind(THINK)
    return (
        turn.api in (Api.CHAT, Api.ANTHROPIC)
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
