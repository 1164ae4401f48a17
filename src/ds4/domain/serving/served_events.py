"""The events the API mappers consume: the generation loop's, plus two the serving job
adds (the prompt's token accounting once it is synced, and the id a streamed tool
call was shown under, drawn by the job so tool replay memory knows it)."""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.errors import ErrorKind
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


def cut_short(finished: Finished) -> bool:
    """The server ended the turn, not the model or the budget: the engine failed, or
    the job was cancelled while its client was still listening — only shutdown does
    that (a disconnected client's cancel reaches nobody)."""
    return finished.finish in ("error", "cancelled")


def cut_reason(finished: Finished) -> str:
    """What the client is told about a turn cut short (the 503 and the stream error
    events say the same)."""
    return "server shutting down" if finished.finish == "cancelled" else "generation failed"


def cut_kind(finished: Finished) -> ErrorKind:
    """The error kind of a turn cut short: shutdown makes the server unavailable, an
    engine failure is internal (Anthropic's error event type follows from it)."""
    return ErrorKind.UNAVAILABLE if finished.finish == "cancelled" else ErrorKind.INTERNAL
