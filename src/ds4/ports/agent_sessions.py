"""SessionIndex: the JSON records that name the agent's saved sessions; their KV state
is in a KVStore next to them (docs/agent.md "Sessions")."""

from __future__ import annotations

from typing import Protocol

from ds4.domain.agent.session_meta import SessionRecord


class SessionIndex(Protocol):
    def records(self) -> list[SessionRecord]:
        """Every readable record (a damaged one is skipped)."""
        ...

    def put(self, record: SessionRecord) -> None:
        """Write (atomically) or replace the record of record.id."""
        ...

    def remove(self, session_id: str) -> None: ...
