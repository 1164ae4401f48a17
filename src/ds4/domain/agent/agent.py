"""The agent's domain facade: one object the worker thread drives
(docs/agent.md "How it is built")."""

from __future__ import annotations

from ds4.domain.agent.compactor import Compactor
from ds4.domain.agent.core import AgentCore
from ds4.domain.agent.screen import AgentState, user_echo
from ds4.domain.agent.slash import HELP, SessionOps, SlashCommand, history_count
from ds4.domain.agent.transcript import queued_message
from ds4.domain.agent.turn_loop import TurnRunner
from ds4.domain.engine.cancel import CancelledError
from ds4.domain.errors import Ds4Error

BANNER = "ds4 agent 🐋 context {ctx} tokens (/help for commands and keys)"

# What a failed command's message starts with.
_FAILURES = {
    "save": "save failed",
    "switch": "switch failed",
    "del": "delete failed",
    "strip": "strip failed",
    "list": "list failed",
    "compact": "compact failed",
}


class Agent:
    def __init__(self, core: AgentCore) -> None:
        self.core = core
        self.compactor = Compactor(core)
        self.turns = TurnRunner(core, self.compactor)
        self.sessions = SessionOps(core)

    @property
    def dirty(self) -> bool:
        return self.core.conv.dirty

    @property
    def last_answer(self) -> str:
        return self.core.conv.last_answer

    def start(self) -> None:
        self.core.start()
        self.core.io.notice(BANNER.format(ctx=self.core.ctx))

    def turn(self, text: str) -> None:
        self.core.io.publish(user_echo(text))
        self.turns.run(text)

    def queued_turn(self, texts: list[str]) -> None:
        """Prompts queued while the model worked, as one turn (each echoed as typed)."""
        for text in texts:
            self.core.io.publish(user_echo(text))
        self.turns.run(queued_message(texts))

    def compact(self) -> str:
        self.core.io.clear_interrupt()
        try:
            done = self.compactor.compact("requested by the user")
        except CancelledError:
            return "compaction interrupted"
        finally:
            self.core.io.clear_interrupt()
            self.core.report(state=AgentState.IDLE)
        return "context compacted" if done else ""

    def command(self, command: SlashCommand) -> str:
        """Run a slash command; the text to show (failures included, never raised)."""
        name = command.name
        try:
            if name == "help":
                return HELP
            if name == "save":
                return self.sessions.save()
            if name == "compact":
                return self.compact()
            if name == "list":
                return self.sessions.listing()
            if name == "switch":
                return self.sessions.switch(command.arg)
            if name == "del":
                return self.sessions.delete(command.arg)
            if name == "strip":
                return self.sessions.strip(command.arg)
            if name == "history":
                return self.sessions.history(history_count(command))
            if name == "new":
                self.core.reset()
                return BANNER.format(ctx=self.core.ctx)
        except (Ds4Error, OSError) as exc:
            self.core.report(state=AgentState.IDLE)
            return f"{_FAILURES.get(name, name + ' failed')}: {exc}"
        return ""
