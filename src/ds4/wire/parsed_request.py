"""A parsed request body: the generation request the server runs, and the options only
its reply reads (docs/adr/0048-wire-formats-at-the-edge.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ds4.domain.serving.exchange import GenerationRequest


@dataclass(frozen=True)
class WireTool:
    """How a prompt-side tool name maps back to the Responses wire (namespace tools,
    hosted tool_search, custom tools); chat and Anthropic use the prompt name as is."""

    wire_name: str
    namespace: str | None = None
    hosted_tool_search: bool = False
    custom: bool = False  # a freeform custom tool: calls are custom_tool_call items


@dataclass(frozen=True)
class ReplyOptions:
    include_usage: bool = False  # chat, completions: stream_options.include_usage
    wire_tools: dict[str, WireTool] = field(default_factory=dict)  # Responses


@dataclass(frozen=True)
class ParsedRequest:
    generation: GenerationRequest
    reply: ReplyOptions = ReplyOptions()
