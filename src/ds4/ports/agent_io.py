"""AgentIO: what the agent's worker needs from its front end, and nothing else
(docs/agent.md "How it is built").

The worker never writes to the terminal: it publishes rendered text and status
snapshots, asks yes/no questions, polls the user's interrupt and takes prompts typed
while it worked. The UI (or the non-interactive driver) implements this thread-safely.
"""

from __future__ import annotations

from enum import Enum
from typing import Protocol

from ds4.domain.agent.screen import AgentStatus


class Approval(Enum):
    YES = "yes"
    NO = "no"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"


class AgentIO(Protocol):
    def publish(self, text: str) -> None:
        """Output for the screen: text with ANSI SGR styling."""
        ...

    def notice(self, text: str) -> None:
        """A status message (one line or more); quiet in non-interactive mode."""
        ...

    def set_status(self, status: AgentStatus) -> None: ...

    def interrupted(self) -> bool:
        """The user asked to stop (Ctrl+C): checked at every chunk, token and wait."""
        ...

    def clear_interrupt(self) -> None: ...

    def confirm(self, question: str) -> Approval:
        """Ask yes/no; no answer within the timeout is TIMEOUT (a no)."""
        ...

    def take_queued(self) -> list[str]:
        """Prompts the user queued while the model worked (the queue is emptied)."""
        ...

    def trace(self, line: str) -> None:
        """One --trace record (time-stamped by the front end)."""
        ...

    def monotonic(self) -> float: ...

    def now(self) -> int:
        """Unix seconds."""
        ...

    def local_time(self) -> str:
        """Local date and time, `%Y-%m-%d %H:%M:%S %Z`."""
        ...
