"""A tool call as the protocol layer sees it."""

from __future__ import annotations

import msgspec


class ToolCall(msgspec.Struct, frozen=True):
    """One call: the tool name and its arguments as JSON text.

    `arguments` is normally the text of a JSON object. From a client it is kept as
    sent (so DSML rendering can keep the client's member order and escapes); from
    the parser it is the compact wire form of docs/reference/chat-and-dsml.md §3.5. `id` is empty
    until one is assigned (tools.tool_ids).
    """

    name: str
    arguments: str
    id: str = ""
