"""What every POST endpoint is reduced to before the worker sees it (docs/reference/server.md §2.1).

The wire modules (chat_request, anthropic_request, responses_request) build these
from JSON; the serving layer renders and runs them. Nothing here knows JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ds4.domain.chat.messages import Message, ThinkMode
from ds4.domain.chat.tool_schemas import ToolSchema

DEFAULT_MODEL = "deepseek-v4-flash"


class Api(Enum):
    CHAT = "chat"  # POST /v1/chat/completions
    COMPLETIONS = "completions"  # POST /v1/completions
    ANTHROPIC = "anthropic"  # POST /v1/messages
    RESPONSES = "responses"  # POST /v1/responses

    @property
    def anthropic_shaped(self) -> bool:
        return self is Api.ANTHROPIC


@dataclass(frozen=True)
class Sampling:
    """Client knobs (docs/reference/server.md §2.3); thinking mode overrides them in the loop."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.05
    seed: int = 0  # <= 0: random


@dataclass(frozen=True)
class WireTool:
    """How a prompt-side tool name maps back to the Responses wire (namespace tools,
    hosted tool_search, custom tools); chat and Anthropic use the prompt name as is."""

    wire_name: str
    namespace: str | None = None
    hosted_tool_search: bool = False
    custom: bool = False  # a freeform custom tool: calls are custom_tool_call items


@dataclass(frozen=True)
class GenerationRequest:
    api: Api
    model: str
    messages: tuple[Message, ...]  # empty for completions
    schemas: tuple[ToolSchema, ...]  # active schemas (tool_choice none -> empty)
    think_mode: ThinkMode  # as requested; the server applies the context fallback
    max_tokens: int | None  # None: the server default (--tokens)
    sampling: Sampling = Sampling()
    stops: tuple[str, ...] = ()
    stream: bool = False
    include_usage: bool = False
    prompt: str | None = None  # completions only: the raw prompt string
    reasoning_summary: bool = False  # Responses: surface reasoning as summary items
    wire_tools: dict[str, WireTool] = field(default_factory=dict)
    speculative: bool = True  # False: no MTP drafts for this request (X-DS4-MTP: off)

    @property
    def tools_active(self) -> bool:
        return bool(self.schemas)
