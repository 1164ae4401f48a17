"""What one generation tells its front end (CLI, the four server APIs, the agent).

The loop (generation.loop) yields these in order: PrefillProgress while the prompt
is evaluated, then text, reasoning and tool-call events as tokens are sampled (cut by
generation.lexer), and exactly one Finished last. Every delta is already safe to send:
- text never ends inside a UTF-8 character (the tokenizer's streaming decoder holds
  the partial bytes);
- TextDelta holds back a tail that might still become a stop string or a tool-block
  tag, and with tools the whitespace before it (docs/reference/server.md §3.4); it never contains
  the stop string itself;
- ReasoningDelta is the thinking text (between the prompt's `<think>` and the first
  `</think>`), without the tags, holding back a tail that might become `</think>`;
  stop strings never match inside it (docs/reference/server.md §3.4).
With log-probabilities asked for (TurnSettings.logprobs), each token chosen is
first a TokenScored, then the deltas it releases (a delta may come tokens later,
when the lexer held its text back). Tool calls stream per call index:
ToolCallStarted once the invoke header is complete, ToolCallArguments fragments
whose concatenation is the call's arguments JSON (one fragment per finished
parameter or loose nested object, plus "{" and "}"),
ToolCallFinished with the call as parsed. Finished carries the authoritative parse
(dsml.parser.finish_turn); what was streamed is a prefix of it (the streamed text of
its content, the streamed calls of its calls) unless the parse had to recover a
block, so a front end sends the rest from Finished. A front end that streamed calls
live still takes ids-by-index from what it showed and the calls from
Finished.tool_calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ds4.domain.dsml.parser import Recovery
from ds4.domain.dsml.syntax import ToolCall
from ds4.domain.sampling import TokenLogprob

# stop: EOS (not evaluated into the state) or a stop string; length: max tokens or
# the context is full; tool_calls: a tool block closed and parsed into >= 1 call;
# error: the engine failed or a tool block never closed; cancelled: the cancel
# callback asked to stop (a disconnected client, Ctrl+C).
FinishReason = Literal["stop", "length", "tool_calls", "error", "cancelled"]


@dataclass(frozen=True, slots=True)
class PrefillProgress:
    """`done` of `total` prompt tokens still to evaluate are in the state."""

    done: int
    total: int


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    index: int
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallArguments:
    index: int
    fragment: str


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    index: int
    call: ToolCall


@dataclass(frozen=True, slots=True)
class TokenScored:
    """A token the turn chose (sampled, forced or EOS), with its log-probability."""

    entry: TokenLogprob


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts for docs/reference/server.md §3.3 (the server clamps and maps them per API).

    prompt_tokens: the prompt that was synced; cached_tokens: how many of them were
    reused from the live state instead of evaluated; completion_tokens: sampled
    tokens, EOS excluded; reasoning_tokens: those of them that were thinking.
    """

    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    reasoning_tokens: int = 0

    @property
    def cache_write_tokens(self) -> int:
        return max(0, self.prompt_tokens - self.cached_tokens)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class Finished:
    """The end of a generation.

    content / reasoning / tool_calls / raw_dsml / recovery come from finish_turn over
    the generated text (with the stop string cut off); `text` is that raw text and
    `tokens` the sampled ids (EOS excluded; the forced "</think>\\n\\n" tokens
    included, as they are in the state). `stop` is the stop string that ended the
    turn, if one did; `error` a one-line reason when finish is "error".
    """

    finish: FinishReason
    content: str
    reasoning: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    text: str = ""
    tokens: tuple[int, ...] = ()
    raw_dsml: str | None = None
    recovery: Recovery = Recovery.NONE
    stop: str | None = None
    error: str | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None
    prompt_logprobs: tuple[TokenLogprob, ...] | None = None


GenerationEvent = (
    PrefillProgress
    | TokenScored
    | TextDelta
    | ReasoningDelta
    | ToolCallStarted
    | ToolCallArguments
    | ToolCallFinished
    | Finished
)
