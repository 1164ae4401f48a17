"""The worker thread: owns the agent (engine session, transcript, tools) and serves
the channel's requests one at a time (docs/agent.md "How it is built").

After each request it runs what was scheduled meanwhile (/compact, then /save), and
prompts queued while the model worked become the next turn at once.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable

from ds4.apps.agent.channel import AgentChannel, Command, Stop, Submit
from ds4.apps.bootstrap import BuiltAgent
from ds4.domain.agent.screen import AgentState
from ds4.domain.agent.slash import SlashCommand
from ds4.domain.errors import Ds4Error

Build = Callable[[AgentChannel], BuiltAgent]


class AgentWorker(threading.Thread):
    def __init__(self, build: Build, channel: AgentChannel) -> None:
        super().__init__(name="ds4-agent-worker", daemon=True)
        self._build = build
        self.channel = channel
        self.built: BuiltAgent | None = None
        self.failed: str | None = None

    def run(self) -> None:
        channel = self.channel
        try:
            self.built = self._build(channel)
            self.built.agent.start()
        except Exception as exc:  # the engine or a directory failed: the UI says so, no hang
            self.failed = str(exc) if isinstance(exc, Ds4Error) else f"{type(exc).__name__}: {exc}"
            channel.fail(self.failed)
            if self.built is not None:
                self.built.close()
            return
        agent = self.built.agent
        channel.worker_idle(session_ids=agent.sessions.session_ids())
        try:
            self._serve()
        finally:
            self.built.close()

    def _serve(self) -> None:
        assert self.built is not None
        agent = self.built.agent
        channel = self.channel
        while True:
            request = channel.next_request()
            if isinstance(request, Stop):
                return
            try:
                self._serve_one(request)
            except Exception as exc:  # a bug must not leave the UI waiting forever
                channel.trace("worker failed:\n" + traceback.format_exc())
                channel.publish(f"internal error: {type(exc).__name__}: {exc}\n")
                agent.core.report(state=AgentState.ERROR, error=f"internal error: {exc}")
            channel.worker_idle(
                answer=agent.last_answer,
                session_ids=agent.sessions.session_ids(),
                dirty=agent.dirty,
            )

    def _serve_one(self, request: Submit | Command) -> None:
        assert self.built is not None
        agent = self.built.agent
        channel = self.channel
        if isinstance(request, Submit):
            agent.turn(request.text)
            while queued := channel.take_queued():  # typed while the model worked
                agent.queued_turn(queued)
        else:
            self._command(request.command)
        save, compact = channel.take_due()
        if compact:
            self._command(SlashCommand("compact", ""))
        if save:
            self._command(SlashCommand("save", ""))

    def _command(self, command: SlashCommand) -> None:
        assert self.built is not None
        out = self.built.agent.command(command)
        if out:
            self.channel.publish(out if out.endswith("\n") else out + "\n")
