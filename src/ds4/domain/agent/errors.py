"""How a tool fails: the model sees `Tool error: <reason>` as the call's result."""

from __future__ import annotations

from ds4.domain.errors import Ds4Error

TOOL_ERROR = "Tool error: "


class ToolError(Ds4Error):
    """A tool could not do what was asked; the message is the reason, without the
    `Tool error: ` prefix (tool_error adds it)."""


def tool_error(reason: str) -> str:
    return TOOL_ERROR + reason
