"""What every reply mapper needs besides the events: ids, time, the echoed model."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from ds4.domain.dsml.syntax import object_members
from ds4.wire.parsed_request import WireTool


@dataclass(frozen=True)
class ReplyContext:
    reply_id: str  # chatcmpl-<n> / cmpl-<n> / msg_<hex> (Anthropic) / resp_<hex>
    created: int  # Unix seconds, fixed at the start of the reply
    model: str
    include_usage: bool = False
    # Responses only: item ids drawn once per response, the summary opt-in and how
    # prompt-side tool names map back to wire names / namespaces.
    item_ids: dict[str, str] = field(default_factory=dict)
    reasoning_summary: bool = False
    wire_tools: dict[str, WireTool] = field(default_factory=dict)


def arguments_object(arguments: str) -> msgspec.Raw:
    """The call's arguments as an embeddable JSON object ({} when not an object)."""
    return msgspec.Raw(arguments.encode() if object_members(arguments) is not None else b"{}")


def arguments_string(arguments: str) -> str:
    return arguments if object_members(arguments) is not None else "{}"
