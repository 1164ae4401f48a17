"""Stop strings over visible text fed in pieces (docs/reference/server.md §3.4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StopHit:
    """The stop string that ended the turn and where it starts in the generated text."""

    string: str
    at: int


class StopStrings:
    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(dict.fromkeys(s for s in stops if s))
        # The tail that may still become a stop string
        # (docs/reference/server.md §3.4: max_stop_len - 1).
        self.hold = max((len(s) for s in self._stops), default=1) - 1

    def first(self, text: str, start: int = 0) -> tuple[int, str] | None:
        """(position, stop) of the match in text[start:] that is complete first; of two
        complete at the same character, the one that starts earlier. A caller that
        feeds text in pieces and keeps `hold` characters of context gets the same
        answer for every split: matches ending in earlier text were already seen."""
        best: tuple[int, int, str] | None = None
        for stop in self._stops:
            pos = text.find(stop, start)
            if pos >= 0 and (best is None or (pos + len(stop), pos) < best[:2]):
                best = (pos + len(stop), pos, stop)
        return None if best is None else (best[1], best[2])
