"""Generation events to terminal text (docs/agent.md "The screen"): thinking dimmed,
answers as they come, each tool call as one readable line instead of its DSML. Only
the screen sees this; the transcript holds the model's own tokens."""

from __future__ import annotations

import json

from ds4.domain.dsml.calls import ToolCall
from ds4.domain.generation.events import (
    GenerationEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallFinished,
)

RESET = "\x1b[0m"
DIM = "\x1b[38;5;245m"
BOLD_CYAN = "\x1b[1;36m"
RED = "\x1b[31m"
GREEN = "\x1b[32m"
BLUE = "\x1b[34m"
PINK = "\x1b[38;5;213m"
MAGENTA_BOLD = "\x1b[1;35m"
ORANGE = "\x1b[38;5;208m"
BOLD_RED = "\x1b[1;31m"
WHITE_BOLD = "\x1b[1;97m"
TOOL_MARK = "🛠️ "
PREVIEW_LINES = 6


def styled(style: str, text: str) -> str:
    return f"{style}{text}{RESET}" if text else ""


def _args(call: ToolCall) -> dict[str, object]:
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _preview(text: str, prefix: str, style: str) -> list[str]:
    lines = text.splitlines() or [""]
    shown = [styled(style, prefix + line) for line in lines[:PREVIEW_LINES]]
    if len(lines) > PREVIEW_LINES:
        shown.append(styled(DIM, f"  ... {len(lines) - PREVIEW_LINES} more lines"))
    return shown


def tool_line(call: ToolCall) -> str:
    """A call as the user reads it (ends with a newline)."""
    args = _args(call)
    name = call.name

    def get(key: str, default: str = "") -> str:
        value = args.get(key, default)
        return value if isinstance(value, str) else json.dumps(value)

    out: list[str]
    if name == "bash":
        out = [TOOL_MARK + styled(BOLD_CYAN, "$ " + get("command"))]
    elif name == "read":
        where = (
            "(whole file)"
            if get("whole").lower() in ("true", "yes", "1")
            else (f"{get('start_line', '1')}:{get('max_lines', '500')}")
        )
        out = [TOOL_MARK + f"Reading {get('path')} {where}..."]
    elif name == "write":
        content = get("content")
        out = [TOOL_MARK + f"write path={get('path')} ({len(content.encode())} bytes)"]
        out += _preview(content, "  ", BLUE)
    elif name == "edit":
        out = [TOOL_MARK + f"edit path={get('path')}"]
        out += _preview(get("old"), "- ", RED) + _preview(get("new"), "+ ", GREEN)
    elif name == "visit_page":
        out = [TOOL_MARK + styled(PINK, f"✦ Opening page {get('url')}")]
    else:
        pairs = " ".join(f"{k}={get(k)}" for k in args)
        out = [TOOL_MARK + f"{name} {pairs}".rstrip()]
    return "\n".join(out) + "\n"


class TerminalRenderer:
    """Turns one round's events into screen text, tracking line starts."""

    def __init__(self) -> None:
        self._kind = ""  # "reasoning" | "text" | "tool"
        self.at_line_start = True

    def _switch(self, kind: str) -> str:
        out = ""
        if self._kind and self._kind != kind and not self.at_line_start:
            out = "\n"
            self.at_line_start = True
        self._kind = kind
        return out

    def _emit(self, text: str, raw: str) -> str:
        if raw:
            self.at_line_start = raw.endswith("\n")
        return text

    def feed(self, event: GenerationEvent) -> str:
        if isinstance(event, ReasoningDelta):
            text = event.text.lstrip("\n") if self._kind != "reasoning" else event.text
            return self._switch("reasoning") + self._emit(styled(DIM, text), text)
        if isinstance(event, TextDelta):
            text = event.text.lstrip("\n") if self._kind != "text" else event.text
            return self._switch("text") + self._emit(text, text)
        if isinstance(event, ToolCallFinished):
            line = tool_line(event.call)
            return self._switch("tool") + self._emit(line, line)
        return ""

    def end(self) -> str:
        """Close the round's output on a fresh line."""
        out = "" if self.at_line_start else "\n"
        self.at_line_start = True
        self._kind = ""
        return out


def user_echo(text: str) -> str:
    return styled(RED, "* ") + styled(WHITE_BOLD, text) + "\n"
