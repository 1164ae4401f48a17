"""The one interface between the UI thread and the worker thread
(docs/agent.md "How it is built").

Everything crosses under one lock: output text the worker publishes (the UI drains
it), the latest status snapshot, requests (a prompt or a command), the prompt queue
typed while the model works, the latched interrupt flag, and the yes/no handshake.
`on_change` is called after every change the UI should draw (prompt_toolkit's
invalidate is safe from any thread); the worker never touches the terminal.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from ds4.domain.agent.screen import DIM, AgentState, AgentStatus, styled
from ds4.domain.agent.slash import SlashCommand
from ds4.domain.errors import Ds4Error
from ds4.ports.agent import Approval

DEFAULT_CONFIRM_SECONDS = 10.0


@dataclass(frozen=True)
class Submit:
    text: str


@dataclass(frozen=True)
class Command:
    command: SlashCommand


@dataclass(frozen=True)
class Stop:
    pass


Request = Submit | Command | Stop


@dataclass(frozen=True)
class Question:
    text: str
    deadline: float | None  # monotonic seconds; None: no timeout


class AgentChannel:
    def __init__(
        self,
        *,
        confirm_seconds: float = DEFAULT_CONFIRM_SECONDS,
        ask: bool = True,
        notices: bool = True,
        trace: AgentTraceFile | None = None,
    ) -> None:
        """`ask`: confirmations reach the user (False: every one is a no, as in
        non-interactive mode); `notices`: status messages are published."""
        self._cond = threading.Condition()
        self._output: list[str] = []
        self._status = AgentStatus()
        self._requests: deque[Request] = deque()
        self._queue: list[str] = []
        self._interrupt = False
        self._busy = True  # until the worker is ready
        self._question: Question | None = None
        self._answer: Approval | None = None
        self._save_due = False
        self._compact_due = False
        self._answer_text = ""
        self._session_ids: list[str] = []
        self._dirty = False
        self._failure: str | None = None
        self._confirm_seconds = confirm_seconds
        self._ask = ask
        self._notices = notices
        self._trace = trace
        self.on_change: Callable[[], None] = lambda: None

    def _changed(self) -> None:
        self.on_change()

    # ---- the worker's side (ports.agent.AgentIO) ------------------------------

    def publish(self, text: str) -> None:
        if not text:
            return
        with self._cond:
            self._output.append(text)
        self._changed()

    def notice(self, text: str) -> None:
        if self._notices:
            self.publish(styled(DIM, text) + "\n")

    def set_status(self, status: AgentStatus) -> None:
        with self._cond:
            self._status = status
        self._changed()

    def interrupted(self) -> bool:
        with self._cond:
            return self._interrupt

    def clear_interrupt(self) -> None:
        with self._cond:
            self._interrupt = False

    def confirm(self, question: str) -> Approval:
        if not self._ask:
            self.notice(f"{question} (y/n) no: confirmations are off; --yes approves all")
            return Approval.NO
        with self._cond:
            deadline = time.monotonic() + self._confirm_seconds
            self._question, self._answer = Question(question, deadline), None
            self._cond.notify_all()
        self._changed()
        with self._cond:
            while self._answer is None and not self._interrupt:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.1))
            answer = self._answer or (Approval.INTERRUPTED if self._interrupt else Approval.TIMEOUT)
            self._question = None
        self._changed()
        word = {Approval.YES: "yes", Approval.NO: "no"}.get(answer, answer.value)
        self.publish(styled(DIM, f"{question} {word}") + "\n")
        return answer

    def take_queued(self) -> list[str]:
        with self._cond:
            queued, self._queue = self._queue, []
        if queued:
            self._changed()
        return queued

    def trace(self, line: str) -> None:
        if self._trace is not None:
            self._trace.write(line)

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> int:
        return int(time.time())

    def local_time(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime())

    # ---- the worker's bookkeeping ---------------------------------------------

    def next_request(self) -> Request:
        """Block until the UI asks for something."""
        with self._cond:
            while not self._requests:
                self._cond.wait()
            return self._requests.popleft()

    def worker_idle(
        self,
        *,
        answer: str | None = None,
        session_ids: list[str] | None = None,
        dirty: bool = False,
    ) -> None:
        """The worker finished a request (or its start) and waits for the next."""
        with self._cond:
            self._busy = bool(self._requests)
            self._dirty = dirty
            if answer is not None:
                self._answer_text = answer
            if session_ids is not None:
                self._session_ids = session_ids
        self._changed()

    def take_due(self) -> tuple[bool, bool]:
        """(save, compact) asked for while the model worked; cleared."""
        with self._cond:
            due = (self._save_due, self._compact_due)
            self._save_due = self._compact_due = False
            return due

    def fail(self, message: str) -> None:
        """The worker could not start or stopped: the UI shows the error."""
        with self._cond:
            self._status = replace(self._status, state=AgentState.ERROR, error=message)
            self._busy = True  # nothing is served any more
            self._failure = message
        self._changed()

    # ---- the UI's side --------------------------------------------------------

    def submit(self, text: str) -> bool:
        """Start a turn if the worker is idle (True); False: queue it instead."""
        with self._cond:
            if self._busy:
                return False
            self._busy = True
            self._requests.append(Submit(text))
            self._status = replace(
                self._status, state=AgentState.PREFILL, prefill_done=0, prefill_total=0
            )
            self._cond.notify_all()
        self._changed()
        return True

    def command(self, command: SlashCommand) -> bool:
        """Run a command now if the worker is idle; False when it is busy."""
        with self._cond:
            if self._busy:
                return False
            self._busy = True
            self._requests.append(Command(command))
            self._cond.notify_all()
        return True

    def schedule(self, name: str) -> None:
        """`save` or `compact` at the worker's next safe point."""
        with self._cond:
            if name == "save":
                self._save_due = True
            else:
                self._compact_due = True

    def stop(self) -> None:
        with self._cond:
            self._interrupt = True
            self._requests.append(Stop())
            self._cond.notify_all()

    def interrupt(self) -> None:
        with self._cond:
            self._interrupt = True
            self._cond.notify_all()
        self._changed()

    def queue(self, text: str) -> None:
        with self._cond:
            self._queue.append(text)
        self._changed()

    def pop_queued(self) -> str | None:
        with self._cond:
            return self._queue.pop(0) if self._queue else None

    def queued(self) -> list[str]:
        with self._cond:
            return list(self._queue)

    def take_output(self) -> str:
        with self._cond:
            out, self._output = "".join(self._output), []
            return out

    def status(self) -> AgentStatus:
        with self._cond:
            return self._status

    @property
    def busy(self) -> bool:
        with self._cond:
            return self._busy

    @property
    def failure(self) -> str | None:
        """Why the worker could not start, if it could not."""
        with self._cond:
            return self._failure

    @property
    def dirty(self) -> bool:
        """The conversation changed since it was last saved."""
        with self._cond:
            return self._dirty

    @property
    def answer_text(self) -> str:
        with self._cond:
            return self._answer_text

    @property
    def session_ids(self) -> list[str]:
        with self._cond:
            return list(self._session_ids)

    def question(self) -> Question | None:
        with self._cond:
            return self._question

    def answer(self, yes: bool) -> None:
        with self._cond:
            if self._question is not None:
                self._answer = Approval.YES if yes else Approval.NO
                self._cond.notify_all()
        self._changed()


# ---- trace file ----------------------------------------------------------------------
# --trace FILE: append-only, one record per line, each starting with the local time
# (`YYYY-MM-DD HH:MM:SS.mmm `), written whole from any thread.


class AgentTraceFile:
    def __init__(self, path: str) -> None:
        try:
            self._file: TextIO = Path(path).open("a", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise Ds4Error(f"cannot open trace file {path}: {exc.strerror}") from None
        self._lock = threading.Lock()

    def write(self, line: str) -> None:
        now = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        millis = int(now * 1000) % 1000
        with self._lock:
            self._file.write(f"{stamp}.{millis:03d} {line}\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()
