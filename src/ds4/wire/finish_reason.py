"""OpenAI's finish_reason for a finished turn (chat completions and completions)."""

from __future__ import annotations

from ds4.domain.generation.events import Finished
from ds4.domain.serving.exchange import cut_short


def wire_finish(finished: Finished) -> str:
    """`stop`, `length` or `tool_calls`. A turn the server cut short is `length`, the
    one value the API defines for output that stops before the model ended it
    (docs/adr/0047-responses-reasons-and-reasoning-only.md)."""
    return "length" if cut_short(finished) else finished.finish
