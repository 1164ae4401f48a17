"""Slash commands (docs/agent.md "Slash commands", "Sessions"): what each one takes and
whether it waits for the model, the /history replay, and the session commands over the
library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ds4.domain.agent.core import AgentCore, Conversation
from ds4.domain.agent.library import SessionLibrary
from ds4.domain.agent.screen import DIM, GREEN, AgentState, TerminalRenderer, styled, tool_line
from ds4.domain.agent.session_meta import listing_text
from ds4.domain.chat import ASSISTANT, EOS, TOOL_RESULT_CLOSE, TOOL_RESULT_OPEN, USER
from ds4.domain.dsml.parser import finish_turn
from ds4.domain.dsml.syntax import THINK_CLOSE, THINK_OPEN
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import ReasoningDelta, TextDelta

# --- history ---
# `/history [N]`: the last N user turns of the transcript and what followed, replayed
# for reading (docs/agent.md "Slash commands"). Assistant turns go through the same
# parse and tool-line rendering as live output; nothing is executed.

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


# --- slash ---
# Slash commands: what each one takes and whether it waits for the model to be idle
# (docs/agent.md "Slash commands").


@dataclass(frozen=True)
class SlashCommand:
    name: str  # without the slash
    arg: str


# name -> (argument usage or "", what it does while the model works: "now" (the UI's
# own), "later" (at the worker's next safe point) or "refuse" (needs an idle model))
COMMANDS: dict[str, tuple[str, str]] = {
    "help": ("", "now"),
    "save": ("", "later"),
    "compact": ("", "later"),
    "list": ("", "refuse"),
    "switch": ("ID", "refuse"),
    "del": ("ID", "refuse"),
    "strip": ("ID", "refuse"),
    "history": ("[N]", "refuse"),
    "new": ("", "refuse"),
    "quit": ("", "now"),
    "exit": ("", "now"),
}

HELP = """commands:
  /help            this list
  /save            save the session (KV state + transcript)
  /list            saved sessions of this model, newest first
  /switch ID       continue a saved session (ID: a unique prefix of its id)
  /del ID          delete a saved session
  /strip ID        drop a saved session's KV state, keep its text
  /history [N]     the last N user turns (default 3)
  /compact         summarize the conversation to free context
  /new             start over from the system prompt
  /quit, /exit     leave (asks to save a changed session)
keys:
  Enter submits (queued while the model works), Alt+Enter adds a line,
  Ctrl+C stops the model (idle: clears the line), Ctrl+D on an empty line leaves,
  Ctrl+X takes back the first queued prompt, Esc sends the queue at once,
  Up/Down history, PageUp/PageDown scroll, y/n answer a confirmation."""


def parse_slash(line: str) -> SlashCommand | None:
    """The command of a line starting with `/`, or None when it names none."""
    if not line.startswith("/"):
        return None
    name, _, arg = line[1:].strip().partition(" ")
    if name not in COMMANDS:
        return None
    return SlashCommand(name, arg.strip())


def when_busy(command: SlashCommand) -> str:
    """ "now", "later" or "refuse": see COMMANDS."""
    return COMMANDS[command.name][1]


def usage_error(command: SlashCommand) -> str | None:
    """A line to print instead of running a command with a bad argument."""
    usage, _ = COMMANDS[command.name]
    if usage == "ID" and not command.arg:
        return f"usage: /{command.name} ID"
    if usage == "" and command.arg:
        return f"usage: /{command.name}"
    arg = command.arg
    if command.name == "history" and arg and not (arg.isdigit() and 1 <= int(arg) <= MAX_TURNS):
        return f"usage: /history [N], N in 1..{MAX_TURNS}"
    return None


def history_count(command: SlashCommand) -> int:
    return int(command.arg) if command.arg else DEFAULT_TURNS


# --- session ops ---
# /save, /switch, /del, /strip and /list over the session library
# (docs/agent.md "Sessions"). A switch restores the engine state from the KV file, so
# nothing is evaluated again; a stripped session is rebuilt by prefilling its text.


class SessionOps:
    def __init__(self, core: AgentCore) -> None:
        self.core = core

    def _library(self) -> SessionLibrary:
        if self.core.library is None:
            raise Ds4Error("saved sessions are not available")
        return self.core.library

    def save(self) -> str:
        c = self.core
        library = self._library()
        conv = c.conv
        if conv.title is None or conv.session_id is None:
            raise Ds4Error("nothing to save")
        c.report(state=AgentState.SAVING)
        try:
            c.sync()  # the transcript's closing EOS is evaluated here
            text = c.tokenizer.decode(conv.tokens)
            record = library.save(
                session_id=conv.session_id,
                title=conv.title,
                created_at=conv.created_at,
                now=c.io.now(),
                tokens=len(conv.tokens),
                text=text,
                payload=c.session.payload(),
            )
        finally:
            c.report(state=AgentState.IDLE)
        conv.dirty = False
        return f"saved session {record.id[:8]} ({record.tokens} tokens)"

    def listing(self) -> str:
        library = self._library()
        return listing_text(library.records(), self.core.io.now(), library.sizes())

    def session_ids(self) -> list[str]:
        return [] if self.core.library is None else [r.id for r in self.core.library.records()]

    def switch(self, prefix: str) -> str:
        c = self.core
        library = self._library()
        record = library.find(prefix)
        loaded = library.load(record)
        user = c.tokenizer.special.user
        if loaded.payload:
            c.session.load_payload(loaded.payload)
            tokens = list(c.session.tokens)
            if len(tokens) != record.tokens:
                c.session.invalidate()
                raise Ds4Error("KV payload token count mismatch")
            prefilled = 0
            how = "restored from its KV file"
        else:
            c.io.notice(f"rebuilding stripped session {record.id[:8]} from rendered text...")
            tokens = c.encode(loaded.text)
            prefilled = c.sync(tokens)
            how = "rebuilt from text"
        system_len = tokens.index(user) if user in tokens else len(tokens)
        c.conv = Conversation(
            tokens,
            system_len,
            title=record.title,
            created_at=record.created_at,
            session_id=record.id,
            datetime_told=True,
            seen_at=len(tokens),
        )
        library.touch(record, c.io.now())
        c.report(state=AgentState.IDLE, last_prefill=prefilled)
        head = (
            f"switched to session {record.id[:8]} ({len(tokens)} tokens, {how}, "
            f"{prefilled} tokens prefilled)\n"
        )
        return head + self.history(DEFAULT_TURNS)

    def delete(self, prefix: str) -> str:
        library = self._library()
        record = library.find(prefix)
        library.delete(record)
        return f"deleted session {record.id[:8]}"

    def strip(self, prefix: str) -> str:
        c = self.core
        library = self._library()
        record = library.find(prefix)
        stripped = library.strip(record, lambda text: len(c.encode(text)), c.io.now())
        return f"stripped session {record.id[:8]} ({stripped.tokens} tokens)"

    def history(self, n: int) -> str:
        c = self.core
        conversation = c.tokenizer.decode(c.conv.tokens[c.conv.system_len :])
        return history_text(conversation, n)
