"""The worker thread: owns the agent (engine session, transcript, tools) and serves
the channel's requests one at a time (docs/agent.md "How it is built").

After each request it runs what was scheduled meanwhile (/compact, then /save), and
prompts queued while the model worked become the next turn at once.
"""

from __future__ import annotations

import re
import sys
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


# ---- headless ------------------------------------------------------------------------
# `ds4 agent --non-interactive`: one task, no terminal UI (docs/agent.md).


_SGR = re.compile(r"\x1b\[[0-9;]*m")


def run_headless(channel: AgentChannel, worker: AgentWorker, prompt: str) -> int:
    changed = threading.Event()
    channel.on_change = changed.set
    color = sys.stderr.isatty()
    interrupted = submitted = False

    def flush() -> None:
        text = channel.take_output()
        if text:
            sys.stderr.write(text if color else _SGR.sub("", text))
            sys.stderr.flush()

    worker.start()
    try:
        while worker.is_alive():
            try:
                changed.wait(0.2)
            except KeyboardInterrupt:
                if interrupted:
                    raise
                interrupted = True
                channel.interrupt()
            changed.clear()
            flush()
            if worker.failed is not None:
                break
            if not channel.busy and channel.status().state is not AgentState.STARTING:
                if submitted:
                    break
                submitted = channel.submit(prompt)
    finally:
        channel.stop()
        worker.join(timeout=10)
        flush()
    status = channel.status()
    if worker.failed is not None or status.state is AgentState.ERROR:
        print(f"ds4 agent: error: {worker.failed or status.error}", file=sys.stderr)
        return 1
    if interrupted:
        return 130
    answer = channel.answer_text
    sys.stdout.write(answer if answer.endswith("\n") or not answer else answer + "\n")
    return 0
