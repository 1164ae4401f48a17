"""Which idle slot a request goes to when the server keeps several live sessions.

A slot is one live session with its own bindings (`--sessions N`, ADR 0045). A request
continues a slot when it would keep at least half of that slot's live state (what the
cache decision and the session's exact rewind floors would keep); among those it goes
to the one it keeps the most of, so a conversation comes back to the state it left.
Keeping less than half means another conversation that only shares an opening (a
system prompt, the tool list): it goes elsewhere, so both conversations stay live (the
disk cache's cold save at the chat anchor serves the shared opening). Otherwise the
request takes an empty slot, else the one used least recently: the stalest
conversation is the one evicted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

NEVER_USED = -1


@dataclass(frozen=True)
class SlotCandidate:
    slot: int
    live: int  # tokens in the slot's live state
    reusable: int  # of those, what the request would keep
    last_used: int  # when its last job ended, as a count of ended jobs (NEVER_USED: none)

    @property
    def continued(self) -> bool:
        """The request continues this slot's conversation, not just its opening."""
        return self.reusable > 0 and 2 * self.reusable >= self.live


def choose_slot(candidates: Sequence[SlotCandidate]) -> int:
    """The slot for one request among the idle ones (at least one)."""
    if not candidates:
        raise ValueError("no idle slot to choose from")
    continued = [c for c in candidates if c.continued]
    if continued:
        return min(continued, key=lambda c: (-c.reusable, c.last_used, c.slot)).slot
    return min(candidates, key=lambda c: (c.live > 0, c.last_used, c.slot)).slot


class SlotLedger:
    """When each slot last ended a job: a counter, not a clock, so the order is exact."""

    def __init__(self, slots: int) -> None:
        self._last_used = [NEVER_USED] * slots
        self._ended = 0

    def last_used(self, slot: int) -> int:
        return self._last_used[slot]

    def ended(self, slot: int) -> None:
        self._ended += 1
        self._last_used[slot] = self._ended
