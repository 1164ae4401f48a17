"""What every POST endpoint is reduced to before the worker sees it, and what the
serving job hands back (docs/reference/server.md §2.1, §5).

The wire package (ds4.wire: one module per API, the APIS table in ds4.wire.apis)
builds GenerationRequests from JSON and maps served events to replies; the serving
layer renders and runs them. Nothing here knows JSON, HTTP or a reply's shape
(docs/adr/0048-wire-formats-at-the-edge.md). What the serving rules need to know of
an API is one row of SERVING_RULES, read through `Api.rules`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ds4.domain.chat import Message, ThinkMode, ToolSchema
from ds4.domain.constraints.request import AUTO, OutputFormat, ToolChoice
from ds4.domain.errors import ErrorKind
from ds4.domain.generation.events import (
    Finished,
    PrefillProgress,
    ReasoningDelta,
    TextDelta,
    TokenScored,
    ToolCallArguments,
    ToolCallFinished,
    Usage,
)
from ds4.domain.sampling import TokenLogprob
from ds4.domain.tools import ToolApi


class Api(Enum):
    """The protocol a conversation arrives through. The serving rules depend on it, not
    only the wire: which live bindings a turn leaves and may continue from, and how
    tool ids look (docs/reference/server.md §5); `rules` holds those facts."""

    CHAT = "chat"  # POST /v1/chat/completions
    COMPLETIONS = "completions"  # POST /v1/completions
    ANTHROPIC = "anthropic"  # POST /v1/messages
    RESPONSES = "responses"  # POST /v1/responses

    @property
    def rules(self) -> ServingRules:
        return SERVING_RULES[self]


class LiveTools(Enum):
    """The live tool state a turn with calls leaves for the client's next request
    (docs/reference/server.md §5.3, §5.4): tool results that name the calls' ids continue
    from the live state instead of replaying the calls."""

    TRANSCRIPT = "transcript"  # the visible transcript and the call ids (Responses)
    CALL_IDS = "call-ids"  # the call ids alone (Anthropic)


@dataclass(frozen=True)
class ServingRules:
    """What the serving layer needs to know of one API."""

    live_tools: LiveTools | None  # None: tool results are always replayed in full
    # a tool-less thinking turn binds its visible transcript, which the next request
    # may continue from (docs/reference/server.md §5.5)
    thinking_continuation: bool
    # calls the next request cannot replay exactly get their canonical checkpoint
    # before the reply goes out (docs/reference/server.md §6)
    canonicalizes_calls: bool
    tool_ids: ToolApi  # how a fresh tool call id looks
    # its messages are a client's conversation, which --prefix-file turns go before
    # (completions' are a fixed template around the raw prompt)
    conversation: bool


SERVING_RULES: dict[Api, ServingRules] = {
    Api.CHAT: ServingRules(
        live_tools=None,
        thinking_continuation=True,
        canonicalizes_calls=True,
        tool_ids="openai",
        conversation=True,
    ),
    Api.COMPLETIONS: ServingRules(
        live_tools=None,
        thinking_continuation=False,
        canonicalizes_calls=False,
        tool_ids="openai",
        conversation=False,
    ),
    Api.ANTHROPIC: ServingRules(
        live_tools=LiveTools.CALL_IDS,
        thinking_continuation=True,
        canonicalizes_calls=True,
        tool_ids="anthropic",
        conversation=True,
    ),
    Api.RESPONSES: ServingRules(
        live_tools=LiveTools.TRANSCRIPT,
        thinking_continuation=False,
        canonicalizes_calls=False,
        tool_ids="openai",
        conversation=True,
    ),
}


@dataclass(frozen=True)
class Sampling:
    """Client knobs (docs/reference/server.md §2.3); thinking mode overrides them in the loop."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.05
    seed: int = 0  # <= 0: random


@dataclass(frozen=True)
class LogprobRequest:
    """What log-probabilities a request asks for (docs/reference/server.md
    "Log-probabilities"): `top` alternatives per token (each API bounds it), and with
    `prompt` (completions' echo) the prompt's tokens too, which evaluates the whole
    prompt afresh (no cached prefix holds its logits)."""

    top: int = 0
    prompt: bool = False
    completion: bool = True  # False: the prompt only (completions' echo without logprobs)


@dataclass(frozen=True)
class GenerationRequest:
    api: Api
    model: str
    messages: tuple[Message, ...]  # completions: the fixed system message and the prompt
    schemas: tuple[ToolSchema, ...]  # active schemas (tool_choice none -> empty)
    think_mode: ThinkMode  # as requested; the server applies the context fallback
    max_tokens: int | None  # None: the server default (--tokens)
    sampling: Sampling = Sampling()
    stops: tuple[str, ...] = ()
    stream: bool = False
    # Responses: the client sees reasoning as summary items, so the visible transcript
    # the live binding keeps includes it (serving.live).
    reasoning_summary: bool = False
    speculative: bool = True  # False: no MTP drafts for this request (X-DS4-MTP: off)
    # the shape of the reply (docs/structured-outputs.md): response_format, text.format
    # or grammar, and tool_choice / parallel_tool_calls
    output_format: OutputFormat | None = None
    tool_choice: ToolChoice = AUTO
    logprobs: LogprobRequest | None = None  # None: no log-probabilities
    # completions with a token-id prompt: these ids are the prompt, as they are (no
    # template, no thinking); `messages` is then empty
    prompt_ids: tuple[int, ...] | None = None
    # Responses `store`: keep the KV state at the turn's end for a later
    # previous_response_id, in memory and on disk (docs/adr/0069-stored-responses.md)
    keep_state: bool = False

    @property
    def tools_active(self) -> bool:
        return bool(self.schemas)


# ---- served events ---------------------------------------------------------
# The events the API mappers consume: the generation loop's, plus two the serving job
# adds (the prompt's token accounting once it is synced, and the id a streamed tool
# call was shown under, drawn by the job so tool replay memory knows it).


@dataclass(frozen=True, slots=True)
class PromptReady:
    """The prompt is in the state: `cached_tokens` of `prompt_tokens` were reused.

    `source` is the state the prefill continued from (prepare.cache_decision's source, or
    "disk-text" after a disk load): the access log and /metrics report it.
    """

    prompt_tokens: int
    cached_tokens: int
    source: str = "none"
    # with an echoed prompt (LogprobRequest.prompt): one entry per prompt token
    prompt_logprobs: tuple[TokenLogprob, ...] | None = None

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
    | TokenScored
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
