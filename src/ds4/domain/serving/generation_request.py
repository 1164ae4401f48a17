"""What every POST endpoint is reduced to before the worker sees it (docs/reference/server.md §2.1).

The wire package (ds4.wire: chat_request, anthropic_request, responses_request)
builds these from JSON; the serving layer renders and runs them. Nothing here knows
JSON, HTTP or a reply's shape (docs/adr/0048-wire-formats-at-the-edge.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ds4.domain.chat import Message, ThinkMode, ToolSchema


class Api(Enum):
    """The protocol a conversation arrives through. The serving rules depend on it, not
    only the wire: which live bindings a turn leaves and may continue from, and how
    tool ids look (docs/reference/server.md §5)."""

    CHAT = "chat"  # POST /v1/chat/completions
    COMPLETIONS = "completions"  # POST /v1/completions
    ANTHROPIC = "anthropic"  # POST /v1/messages
    RESPONSES = "responses"  # POST /v1/responses


@dataclass(frozen=True)
class Sampling:
    """Client knobs (docs/reference/server.md §2.3); thinking mode overrides them in the loop."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.05
    seed: int = 0  # <= 0: random


@dataclass(frozen=True)
class GenerationRequest:
    api: Api
    model: str
    messages: tuple[Message, ...]  # completions: the fixed system message and the prompt
    schemas: tuple[ToolSchema, ...]  # active schemas (tool_choice none -> empty)
    think_mode: ThinkMode  # as requested; the server applies the context fallback
    max_tokens: int | None  # None: the server default (--tokens)
    sampling: Sampling = Sampling()
    stops: tuple[str, ...] = ()
    stream: bool = False
    # Responses: the client sees reasoning as summary items, so the visible transcript
    # the live binding keeps includes it (serving.live_bindings).
    reasoning_summary: bool = False
    speculative: bool = True  # False: no MTP drafts for this request (X-DS4-MTP: off)

    @property
    def tools_active(self) -> bool:
        return bool(self.schemas)
