"""`/history [N]`: the last N user turns of the transcript and what followed, replayed
for reading (docs/agent.md "Slash commands"). Assistant turns go through the same
parse and tool-line rendering as live output; nothing is executed."""

from __future__ import annotations

import re

from ds4.domain.agent.render import DIM, GREEN, TerminalRenderer, styled, tool_line
from ds4.domain.chat.constants import ASSISTANT, EOS, TOOL_RESULT_CLOSE, TOOL_RESULT_OPEN, USER
from ds4.domain.dsml.syntax import THINK_CLOSE, THINK_OPEN
from ds4.domain.dsml.turn import finish_turn
from ds4.domain.generation.events import ReasoningDelta, TextDelta

DEFAULT_TURNS = 3
MAX_TURNS = 200
_MARKERS = re.compile("(" + "|".join(re.escape(m) for m in (USER, ASSISTANT, EOS)) + ")")
_GREEN_BOLD = "\x1b[1;32m"


def split_turns(text: str) -> list[tuple[str, str]]:
    """(kind, body) for each turn: "user", "tool" or "assistant"."""
    turns: list[tuple[str, str]] = []
    current: list[str] | None = None
    kind = ""
    for part in _MARKERS.split(text):
        if part in (USER, ASSISTANT, EOS):
            if current is not None:
                turns.append((kind, "".join(current)))
            current = None if part == EOS else []
            kind = "user" if part == USER else "assistant"
        elif current is not None:
            current.append(part)
    if current is not None:
        turns.append((kind, "".join(current)))
    out = []
    for kind, body in turns:
        if kind == "user" and body.startswith(TOOL_RESULT_OPEN):
            inner = body[len(TOOL_RESULT_OPEN) :]
            inner = inner.removesuffix(TOOL_RESULT_CLOSE)
            out.append(("tool", inner.replace("&lt;" + TOOL_RESULT_CLOSE[1:], TOOL_RESULT_CLOSE)))
        elif kind == "user" and body.startswith(("Tool: ", "Tool result")):
            out.append(("tool", body.removeprefix("Tool: ")))
        else:
            out.append((kind, body))
    return out


def _head(text: str, lines: int, size: int) -> str:
    rows = text.split("\n")
    cut = "\n".join(rows[:lines])
    if len(cut.encode()) > size:
        cut = cut.encode()[:size].decode("utf-8", errors="ignore")
    return cut + ("\n..." if cut != text else "")


def _tail(text: str, lines: int, size: int) -> str:
    rows = text.rstrip("\n").split("\n")
    cut = "\n".join(rows[-lines:])
    if len(cut.encode()) > size:
        cut = cut.encode()[-size:].decode("utf-8", errors="ignore")
    if cut != text.rstrip("\n"):
        return "... earlier assistant history truncated; showing tail ...\n" + cut
    return cut


def replay_assistant(body: str) -> str:
    thinking = body.startswith(THINK_OPEN)
    text = body if thinking else body.removeprefix(THINK_CLOSE)
    turn = finish_turn(text, tools_active=True, thinking=thinking, finish="stop")
    renderer = TerminalRenderer()
    out = ""
    if turn.reasoning:
        out += renderer.feed(ReasoningDelta(turn.reasoning.strip("\n")))
    if turn.content.strip():
        out += renderer.feed(TextDelta(turn.content.strip("\n")))
    out += renderer.end()
    out += "".join(tool_line(call) for call in turn.calls)
    return out


def history_text(conversation: str, n: int) -> str:
    turns = split_turns(conversation)
    humans = [i for i, (kind, _) in enumerate(turns) if kind == "user"]
    if not turns:
        return "(no user history)\n"
    first = (
        humans[-n] if len(humans) >= n else (humans[0] if humans else max(0, len(turns) - 2 * n))
    )
    shown = len([i for i in humans if i >= first])
    out = [styled(DIM, f"--- session history: last {shown} user turn(s) ---") + "\n"]
    for kind, body in turns[first:]:
        if kind == "user":
            out.append(styled(_GREEN_BOLD, "User:") + " " + _head(body.strip(), 24, 6000) + "\n")
        elif kind == "tool":
            out.append(
                styled(DIM, "Tool result:") + "\n" + styled(DIM, _head(body, 12, 3000)) + "\n"
            )
        else:
            out.append(
                styled(GREEN, "Assistant:") + "\n" + _tail(replay_assistant(body), 80, 12000)
            )
            if not out[-1].endswith("\n"):
                out.append("\n")
    out.append(styled(DIM, "--- end history ---") + "\n")
    return "".join(out)
