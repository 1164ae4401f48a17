"""What the agent's screen shows (docs/agent.md "The screen"): generation events as
terminal text and the worker's footer line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

from ds4.domain.dsml.syntax import ToolCall
from ds4.domain.generation.events import (
    GenerationEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallFinished,
)

# --- render ---
# Generation events to terminal text (docs/agent.md "The screen"): thinking dimmed,
# answers as they come, each tool call as one readable line instead of its DSML. Only
# the screen sees this; the transcript holds the model's own tokens.

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


# --- status ---
# The worker's state as the UI shows it: one footer line (docs/agent.md "The screen").

BAR_CELLS = 32
PREFILL_LABELS = ("reading", "absorbing", "studying", "gathering", "crunching", "scrutinizing")


class AgentState(Enum):
    STARTING = "starting"
    IDLE = "idle"
    PREFILL = "prefill"
    GENERATING = "generating"
    TOOL = "tool"  # a tool runs (or waits for the user's yes/no)
    COMPACTING = "compacting"
    SAVING = "saving"
    ERROR = "error"
    STOPPED = "stopped"

    @property
    def busy(self) -> bool:
        return self not in (AgentState.IDLE, AgentState.ERROR, AgentState.STOPPED)


@dataclass(frozen=True)
class AgentStatus:
    state: AgentState = AgentState.STARTING
    ctx_used: int = 0
    ctx_size: int = 0
    prefill_done: int = 0
    prefill_total: int = 0
    prefill_label: str = PREFILL_LABELS[0]
    prefill_tps: float = 0.0
    generated: int = 0
    gen_tps: float = 0.0
    tool: str = ""
    error: str = ""
    last_prefill: int | None = None  # tokens the last sync or restore had to evaluate


def short_count(n: int) -> str:
    """1234 -> 1.2k, 32000 -> 32k, 999 -> 999."""
    if n < 1000:
        return str(n)
    if n % 1000 == 0:
        return f"{n // 1000}k"
    return f"{n / 1000:.1f}k"


def progress_bar(done: int, total: int, rate: str) -> str:
    """32 cells of `▶` (done) and `·`, with the rate written over the empty part."""
    frac = 0.0 if total <= 0 else min(1.0, done / total)
    filled = int(frac * BAR_CELLS)
    if done < total:
        filled = max(1, min(BAR_CELLS - 1, filled))
    empty = BAR_CELLS - filled
    rest = list("·" * empty)
    if len(rate) + 2 <= empty:
        rest[1 : 1 + len(rate)] = list(rate)
    return "▶" * filled + "".join(rest)


def footer_text(s: AgentStatus) -> str:
    head = f"ctx {short_count(s.ctx_used)}/{short_count(s.ctx_size)} | "
    state = s.state
    if state is AgentState.PREFILL:
        pct = 0.0 if s.prefill_total <= 0 else 100.0 * s.prefill_done / s.prefill_total
        bar = progress_bar(s.prefill_done, s.prefill_total, f"{s.prefill_tps:.0f}t/s")
        return (
            head + f"{s.prefill_label} [{bar}] {short_count(s.prefill_done)}/"
            f"{short_count(s.prefill_total)} {pct:.1f}%"
        )
    if state is AgentState.GENERATING:
        return head + f"generation {short_count(s.generated)} tokens {s.gen_tps:.1f} t/s"
    if state is AgentState.COMPACTING:
        return head + f"COMPACTING summary {short_count(s.generated)} tokens {s.gen_tps:.1f} t/s"
    if state is AgentState.TOOL:
        return head + f"running {s.tool}"
    if state is AgentState.SAVING:
        return head + "saving session"
    if state is AgentState.ERROR:
        return head + f"error: {s.error}"
    if state is AgentState.STOPPED:
        return head + "interrupted"
    if state is AgentState.STARTING:
        return head + "starting"
    tail = "" if s.last_prefill is None else f" | last prefill {s.last_prefill} tokens"
    return head + "idle" + tail
