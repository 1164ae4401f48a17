"""Generation as a few free functions: prefill, then decode a chat turn or raw tokens.

The engine side (Session) sees token ids only; this module turns sampled ids into
the events of generation.events. One turn:
1. prefill: reuse the live prefix, evaluate the rest chunk by chunk (progress events);
2. decode: the decoded text goes through generation.lexer, which says what to do:
   sample greedily inside tool-call structure, stop at a stop string or a closed tool
   block, feed "</think>\\n\\n" when a tool call was begun inside reasoning (the
   forced close of docs/reference/chat-and-dsml.md §3.8); the loop also stops on EOS (never
   evaluated), the token budget, a full context or cancellation; `on_token(token)` runs after each
   token is evaluated, before the next step (the server's continued KV saves); `steer`
   may force a token instead of sampling one (ds4 eval's reply budgets,
   domain/eval/think_close.py);
3. finish: flush held text, parse the turn (dsml.turn.finish_turn), report usage.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ds4.domain.dsml.syntax import THINK_CLOSE
from ds4.domain.dsml.turn import FinishReason as TurnFinish
from ds4.domain.dsml.turn import finish_turn
from ds4.domain.engine.cancel import CancelCheck, CancelledError, never_cancel
from ds4.domain.engine.session import Session
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import (
    Finished,
    FinishReason,
    GenerationEvent,
    PrefillProgress,
    Usage,
)
from ds4.domain.generation.lexer import TurnLexer
from ds4.domain.sampling.params import GREEDY, SamplingParams
from ds4.domain.sampling.rng import XorShiftStar
from ds4.domain.sampling.sampler import sample
from ds4.ports.tokenizer import Tokenizer

FORCED_THINK_CLOSE = THINK_CLOSE + "\n\n"

OnToken = Callable[[int], None]
# Before each sampled token: (logits, tokens generated so far, still reasoning) ->
# a token to emit instead of sampling, or None to sample.
Steer = Callable[[npt.NDArray[np.float32], int, bool], int | None]


def ignore_token(_token: int) -> None:
    """The default on_token: nothing to do after a token."""
    return None


@dataclass(frozen=True)
class TurnSettings:
    """How one chat turn is decoded.

    thinking: the prompt ended with <think> (the output starts as reasoning);
    tools_active: the request declared tools (DSML becomes tool calls and steers
    sampling); stops: stop strings, matched in visible text only.
    """

    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_tokens: int = 50_000
    stops: tuple[str, ...] = ()
    tools_active: bool = False
    thinking: bool = False


def prefill(
    session: Session, prompt: Sequence[int], *, cancel: CancelCheck = never_cancel
) -> Generator[PrefillProgress, None, int]:
    """Sync the session to `prompt`, yielding progress; returns the reused token count.

    Raises Ds4Error when the prompt does not fit and CancelledError at a chunk boundary.
    """
    cached = session.reuse(prompt)
    for done, total in session.extend(prompt[cached:], cancel=cancel):
        yield PrefillProgress(done, total)
    return cached


def generate(
    session: Session,
    prompt: Sequence[int],
    tokenizer: Tokenizer,
    settings: TurnSettings,
    *,
    cancel: CancelCheck = never_cancel,
) -> Iterator[GenerationEvent]:
    """Prefill `prompt` and decode one turn; the last event is always Finished.

    A prompt that does not fit raises Ds4Error before any event; an engine failure
    while prefilling propagates (nothing was generated to report).
    """
    try:
        cached = yield from prefill(session, prompt, cancel=cancel)
    except CancelledError:
        yield Finished("cancelled", "", None, (), Usage(len(prompt), 0, 0))
        return
    yield from decode_turn(
        session, tokenizer, settings, prompt_tokens=len(prompt), cached=cached, cancel=cancel
    )


def _parse_finish(finish: FinishReason) -> TurnFinish:
    """What the parser needs: whether the budget ran out or the engine failed."""
    if finish == "length":
        return "length"
    if finish == "error":
        return "error"
    return "stop"


class _Turn:
    """The mutable state of one decode: the text so far, its lexer and counters."""

    def __init__(self, tokenizer: Tokenizer, settings: TurnSettings) -> None:
        self.tokenizer = tokenizer
        self.settings = settings
        self.decoder = tokenizer.streaming_decoder()
        self.lexer = TurnLexer(
            thinking=settings.thinking, tools_active=settings.tools_active, stops=settings.stops
        )
        self.pieces: list[str] = []  # the decoded text, joined once at the end
        self.tokens: list[int] = []
        self.reasoning_tokens = 0

    def push(self, token: int) -> list[GenerationEvent]:
        """Account for one token now in the state; return the events it releases."""
        if self.lexer.in_reasoning:
            self.reasoning_tokens += 1
        self.tokens.append(token)
        return self._feed(self.decoder.feed(token))

    def _feed(self, delta: str) -> list[GenerationEvent]:
        self.pieces.append(delta)
        return list(self.lexer.feed(delta))

    def finished(
        self, finish: FinishReason, usage: Usage, error: str | None = None
    ) -> list[GenerationEvent]:
        events = self._feed(self.decoder.flush())
        events += self.lexer.finish()
        text = "".join(self.pieces)
        stop = self.lexer.stop
        if stop is not None:
            text = text[: stop.at]
        turn = finish_turn(
            text,
            tools_active=self.settings.tools_active,
            thinking=self.settings.thinking,
            finish=_parse_finish(finish),
        )
        final: FinishReason = finish if finish in ("cancelled", "error") else turn.finish
        counted = Usage(
            usage.prompt_tokens, usage.cached_tokens, len(self.tokens), self.reasoning_tokens
        )
        events.append(
            Finished(
                final,
                turn.content,
                turn.reasoning,
                turn.calls,
                counted,
                text=text,
                tokens=tuple(self.tokens),
                raw_dsml=turn.raw_dsml,
                recovery=turn.recovery,
                stop=None if stop is None else stop.string,
                error=error,
            )
        )
        return events


def decode_turn(
    session: Session,
    tokenizer: Tokenizer,
    settings: TurnSettings,
    *,
    prompt_tokens: int,
    cached: int = 0,
    cancel: CancelCheck = never_cancel,
    on_token: OnToken = ignore_token,
    steer: Steer | None = None,
) -> Iterator[GenerationEvent]:
    """Decode one turn from a prefilled session (its logits follow the prompt).

    on_token(token) runs after each token is evaluated into the session (forced
    tokens included), so the state then holds exactly the tokens so far. steer, when
    given, is asked before each token that would be sampled and may force one instead
    (a forced token is never taken for EOS).
    """
    turn = _Turn(tokenizer, settings)
    usage = Usage(prompt_tokens, cached, 0)
    budget = max(0, min(settings.max_tokens, session.ctx - session.pos))
    rng = XorShiftStar(settings.sampling.seed)
    eos = tokenizer.special.eos
    forced = tokenizer.encode(FORCED_THINK_CLOSE)
    finish: FinishReason = "length"
    error: str | None = None
    try:
        logits = session.logits()
        while len(turn.tokens) < budget:
            if cancel():
                finish = "cancelled"
                break
            if turn.lexer.force_think_close:
                if session.pos + len(forced) > session.ctx:
                    break
                for token in forced:
                    logits = session.eval(token)
                    on_token(token)
                    yield from turn.push(token)
                continue
            steered = None
            if steer is not None:
                steered = steer(logits, len(turn.tokens), turn.lexer.in_reasoning)
            if steered is None:
                params = GREEDY if turn.lexer.greedy else settings.sampling
                token = sample(logits, params, rng)
                if token == eos:
                    finish = "stop"
                    break
            else:
                token = steered
            logits = session.eval(token)
            on_token(token)
            yield from turn.push(token)
            if turn.lexer.stop is not None:
                finish = "stop"
                break
            if turn.lexer.block_closed:
                finish = "tool_calls"
                break
    except Ds4Error as exc:
        finish, error = "error", str(exc)
    yield from turn.finished(finish, usage, error)


def cut_by_context(finished: Finished, max_tokens: int) -> bool:
    """Whether decode_turn stopped because the context was full, not at max_tokens (the
    client sees finish `length` either way; the operator should hear of the first)."""
    return finished.finish == "length" and finished.usage.completion_tokens < max_tokens


def decode_tokens(
    session: Session,
    sampling: SamplingParams,
    max_tokens: int,
    *,
    eos: int,
    cancel: CancelCheck = never_cancel,
) -> Iterator[int]:
    """Plain token-level decoding (no chat protocol): yields each evaluated token.

    Stops before EOS (not evaluated), at the budget, when the context is full, or
    when cancel() says so.
    """
    rng = XorShiftStar(sampling.seed)
    budget = max(0, min(max_tokens, session.ctx - session.pos))
    logits = session.logits()
    for _ in range(budget):
        if cancel():
            return
        token = sample(logits, sampling, rng)
        if token == eos:
            return
        logits = session.eval(token)
        yield token
