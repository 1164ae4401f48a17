"""Slash commands: what each one takes and whether it waits for the model to be idle
(docs/agent.md "Slash commands")."""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.agent.history import DEFAULT_TURNS, MAX_TURNS


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
