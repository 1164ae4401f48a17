"""The events the API mappers consume: the generation loop's, plus two the serving job
adds (the prompt's token accounting once it is synced, and the id a streamed tool
call was shown under, drawn by the job so tool replay memory knows it)."""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.generation.events import (
    Finished,
    PrefillProgress,
    ReasoningDelta,
    TextDelta,
    ToolCallArguments,
    ToolCallFinished,
    Usage,
)


@dataclass(frozen=True, slots=True)
class PromptReady:
    """The prompt is in the state: `cached_tokens` of `prompt_tokens` were reused.

    `source` is the state the prefill continued from (serving.decision's source, or
    "disk-text" after a disk load): the access log and /metrics report it.
    """

    prompt_tokens: int
    cached_tokens: int
    source: str = "none"

    def usage(self) -> Usage:
        return Usage(self.prompt_tokens, self.cached_tokens, 0)


@dataclass(frozen=True, slots=True)
class ToolCallOpened:
    """A tool call's invoke header is complete; the client sees it under `call_id`."""

    index: int
    name: str
    call_id: str


ServedEvent = (
    PrefillProgress
    | PromptReady
    | TextDelta
    | ReasoningDelta
    | ToolCallOpened
    | ToolCallArguments
    | ToolCallFinished
    | Finished
)


def wire_finish(finished: Finished) -> str:
    """The finish reason clients see; a cancelled job only reaches a gone client."""
    return "error" if finished.finish == "cancelled" else finished.finish
