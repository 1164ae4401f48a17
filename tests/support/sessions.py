"""Test shorthand: bring an EngineSession to a prompt the way the generation loop does."""

from __future__ import annotations

from collections.abc import Sequence

from ds4.domain.engine.cancel import CancelCheck, never_cancel
from ds4.domain.engine.session import EngineSession
from ds4.domain.generation.events import PrefillProgress
from ds4.domain.generation.loop import prefill


def prefilled(
    session: EngineSession,
    prompt: Sequence[int],
    *,
    cancel: CancelCheck = never_cancel,
    progress: list[PrefillProgress] | None = None,
) -> int:
    """Run loop.prefill to its end (collecting its events in `progress`); the reused count."""
    events = prefill(session, prompt, cancel=cancel)
    while True:
        try:
            event = next(events)
        except StopIteration as done:
            return int(done.value)
        if progress is not None:
            progress.append(event)
