"""Generation as a few free functions: prefill, then decode a chat turn or raw tokens.

The engine side (EngineSession) sees token ids only; this module turns sampled ids into
the events of generation.events. One turn:
1. prefill: reuse the live prefix, evaluate the rest chunk by chunk (progress events);
2. decode: the decoded text goes through generation.lexer, which says what to do:
   sample greedily inside tool-call structure, stop at a stop string or a closed tool
   block, feed "</think>\\n\\n" when a tool call was begun inside reasoning (the
   forced close of docs/reference/chat-and-dsml.md §3.8); the loop also stops on EOS (never
   evaluated), the token budget, a full context or cancellation; `on_token(token)` runs after each
   token is evaluated, before the next step (the server's continued KV saves); `steer`
   may force a token instead of sampling one (ds4 eval's reply budgets,
   domain/eval/prompts.py);
3. finish: flush held text, parse the turn (dsml.parser.finish_turn), report usage.

With `TurnSettings.logprobs` set, each chosen token (sampled, drafted, forced, or the
EOS that ends the turn) is scored on the logits it was chosen from, before the
sampler's transforms (sampling.token_logprob, the computation `--dump-logprobs`
uses), and reported as a TokenScored event and in Finished.logprobs.

With a drafter on the session (docs/mtp.md) a decode step may take several tokens: the
sampled token and the drafts that follow it are evaluated together, each draft is kept
or not as the sampler would have chosen it (domain/sampling.py), and
the rejected ones are rewound. The lexer sees every kept token in order, so a stop,
a closed tool block or a forced close ends the block there; `on_token` then runs for
each kept token once the block is settled (the state already holds all of them).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ds4.domain.dsml.parser import FinishReason as TurnFinish
from ds4.domain.dsml.parser import finish_turn
from ds4.domain.dsml.syntax import THINK_CLOSE
from ds4.domain.engine.cancel import CancelCheck, CancelledError, never_cancel
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import (
    Finished,
    FinishReason,
    GenerationEvent,
    PrefillProgress,
    TokenScored,
    Usage,
)
from ds4.domain.generation.lexer import TurnLexer
from ds4.domain.sampling import (
    GREEDY,
    SamplingParams,
    TokenLogprob,
    XorShiftStar,
    accept_draft,
    masked_logits,
    sample,
    token_logprob,
)
from ds4.ports.constraint import TokenConstraint
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
    speculative: bool = True  # use the session's drafter, if it has one
    # the grammar the visible reply must match (docs/structured-outputs.md): it starts
    # after reasoning, and a constrained turn is decoded without drafts
    constraint: TokenConstraint | None = None
    logprobs: int | None = None  # score each chosen token, with this many alternatives


def prefill(
    session: EngineSession, prompt: Sequence[int], *, cancel: CancelCheck = never_cancel
) -> Generator[PrefillProgress, None, int]:
    """Sync the session to `prompt`, yielding progress; returns the reused token count.

    Raises Ds4Error when the prompt does not fit and CancelledError at a chunk boundary.
    """
    cached = session.reuse(prompt)
    for done, total in session.extend(prompt[cached:], cancel=cancel):
        yield PrefillProgress(done, total)
    return cached


def generate(
    session: EngineSession,
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


class _Guide:
    """A turn's constraint: off while the turn is reasoning (it starts after
    `</think>`), then the mask of every sampled token and the record of every token
    taken; `broken` once the grammar refused a token that was forced on it."""

    def __init__(self, constraint: TokenConstraint | None) -> None:
        self.constraint = constraint
        self.broken = False

    def view(self, logits: npt.NDArray[np.float32], reasoning: bool) -> npt.NDArray[np.float32]:
        if self.constraint is None or reasoning:
            return logits
        return masked_logits(logits, self.constraint.allowed())

    def took(self, token: int, reasoning: bool) -> None:
        """`token` was pushed; `reasoning`: the turn was reasoning before it."""
        if self.constraint is not None and not reasoning and not self.broken:
            self.broken = not self.constraint.advance(token)


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
        self.scores: list[TokenLogprob] | None = None if settings.logprobs is None else []

    def params(self) -> SamplingParams:
        return GREEDY if self.lexer.greedy else self.settings.sampling

    @property
    def ended(self) -> FinishReason | None:
        """Why the turn must stop after the tokens pushed so far, if it must."""
        if self.lexer.stop is not None:
            return "stop"
        if self.lexer.block_closed:
            return "tool_calls"
        return None

    def score(self, logits: npt.NDArray[np.float32], token: int) -> TokenLogprob | None:
        """`token`'s entry when log-probabilities were asked for; call it before the
        state moves on (a backend may reuse the buffer `logits` views)."""
        if self.settings.logprobs is None:
            return None
        return token_logprob(logits, token, self.settings.logprobs, self.tokenizer.token_bytes)

    def scored(self, entry: TokenLogprob | None) -> list[GenerationEvent]:
        if entry is None or self.scores is None:
            return []
        self.scores.append(entry)
        return [TokenScored(entry)]

    def push(self, token: int, entry: TokenLogprob | None = None) -> list[GenerationEvent]:
        """Account for one token now in the state (scored as `entry`, if it was);
        return the events it releases."""
        if self.lexer.in_reasoning:
            self.reasoning_tokens += 1
        self.tokens.append(token)
        return self.scored(entry) + self._feed(self.decoder.feed(token))

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
                logprobs=None if self.scores is None else tuple(self.scores),
            )
        )
        return events


# after a verified block: the logits after its last kept token, the token chosen where
# a draft was rejected, and why the turn ends, if it does
BlockEnd = tuple[npt.NDArray[np.float32], int | None, FinishReason | None]


def drafts_for(session: EngineSession, token: int, room: int, eos: int) -> list[int]:
    """The drafter's proposals to verify with `token`: at most `room` (and what the
    session allows and the context holds), none from EOS on (EOS is never evaluated)."""
    limit = min(session.draft_limit, room, session.ctx - session.pos - 1)
    if session.drafter is None or limit <= 0:
        return []
    drafts = session.draft(token, limit)
    return drafts[: drafts.index(eos)] if eos in drafts else drafts


def decode_turn(
    session: EngineSession,
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
    tokens included), so the state then holds the tokens so far (with a drafter, up
    to the end of the token's verified block). steer, when given, is asked before each
    token that would be sampled and may force one instead (a forced token is never
    taken for EOS); it sees every position, so a steered turn is decoded without drafts.
    """
    turn = _Turn(tokenizer, settings)
    usage = Usage(prompt_tokens, cached, 0)
    budget = max(0, min(settings.max_tokens, session.ctx - session.pos))
    rng = XorShiftStar(settings.sampling.seed)
    eos = tokenizer.special.eos
    forced = tokenizer.encode(FORCED_THINK_CLOSE)
    finish: FinishReason = "length"
    error: str | None = None
    pending: int | None = None  # the token a rejected draft's position gets
    guide = _Guide(settings.constraint)
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
                    entry = turn.score(logits, token)
                    logits = session.eval(token)
                    on_token(token)
                    reasoning = turn.lexer.in_reasoning
                    yield from turn.push(token, entry)
                    guide.took(token, reasoning)
                continue
            steered = None
            if steer is not None:
                steered = steer(logits, len(turn.tokens), turn.lexer.in_reasoning)
            reasoning = turn.lexer.in_reasoning
            if steered is None:
                if pending is None:
                    pending = sample(guide.view(logits, reasoning), turn.params(), rng)
                token = pending
                if token == eos:
                    yield from turn.scored(turn.score(logits, token))
                    finish = "stop"
                    break
            else:
                token = steered
            pending = None
            room = budget - len(turn.tokens) - 1
            speculate = settings.speculative and steer is None and settings.constraint is None
            drafts = drafts_for(session, token, room, eos) if speculate else []
            entry = turn.score(logits, token)
            if drafts:
                block = _verify_block(session, turn, (token, entry), drafts, rng, on_token)
                logits, pending, ended = yield from block
            else:
                logits = session.eval(token)
                on_token(token)
                yield from turn.push(token, entry)
                guide.took(token, reasoning)
                ended = turn.ended
                if guide.broken:
                    finish, error = "error", f"the output grammar refused token {token}"
                    break
            if ended is not None:
                finish = ended
                break
    except Ds4Error as exc:
        finish, error = "error", str(exc)
    yield from turn.finished(finish, usage, error)


def cut_by_context(finished: Finished, max_tokens: int) -> bool:
    """Whether decode_turn stopped because the context was full, not at max_tokens (the
    client sees finish `length` either way; the operator should hear of the first)."""
    return finished.finish == "length" and finished.usage.completion_tokens < max_tokens


def _verify_block(
    session: EngineSession,
    turn: _Turn,
    chosen: tuple[int, TokenLogprob | None],
    drafts: list[int],
    rng: XorShiftStar,
    on_token: OnToken,
) -> Generator[GenerationEvent, None, BlockEnd]:
    """Evaluate `token` and its drafts at once, keep the drafts the sampler agrees with
    (in order, stopping where the turn must), rewind the rest. Returns the logits
    after the last kept token, the token chosen where a draft was rejected, and why
    the turn ends, if it does."""
    token, entry = chosen
    start = session.pos
    rows = session.verify([token, *drafts])
    kept = [(token, turn.push(token, entry))]
    pending: int | None = None
    for i, draft in enumerate(drafts):  # drafts_for left room for all of them in the budget
        if turn.ended is not None or turn.lexer.force_think_close:
            break
        ok, choice = accept_draft(rows[i], turn.params(), draft, rng)
        if not ok:
            pending = choice
            break
        kept.append((draft, turn.push(draft, turn.score(rows[i], draft))))
    session.keep(start + len(kept))
    if session.drafter is not None:
        session.drafter.settle(len(drafts), len(kept) - 1)
    for kept_token, events in kept:
        on_token(kept_token)
        yield from events
    return rows[len(kept) - 1], pending, turn.ended


def decode_tokens(
    session: EngineSession,
    sampling: SamplingParams,
    max_tokens: int,
    *,
    eos: int,
    cancel: CancelCheck = never_cancel,
) -> Iterator[int]:
    """Plain token-level decoding (no chat protocol): yields each evaluated token.

    Stops before EOS (not evaluated), at the budget, when the context is full, or
    when cancel() says so. With a drafter, a step evaluates a token and its drafts at
    once and yields every token kept.
    """
    rng = XorShiftStar(sampling.seed)
    budget = max(0, min(max_tokens, session.ctx - session.pos))
    logits = session.logits()
    produced = 0
    pending: int | None = None
    while produced < budget:
        if cancel():
            return
        token = pending if pending is not None else sample(logits, sampling, rng)
        pending = None
        if token == eos:
            return
        drafts = drafts_for(session, token, budget - produced - 1, eos)
        if not drafts:
            logits = session.eval(token)
            produced += 1
            yield token
            continue
        start = session.pos
        rows = session.verify([token, *drafts])
        kept = [token]
        for i, draft in enumerate(drafts):
            ok, choice = accept_draft(rows[i], sampling, draft, rng)
            if not ok:
                pending = choice
                break
            kept.append(draft)
        session.keep(start + len(kept))
        if session.drafter is not None:
            session.drafter.settle(len(drafts), len(kept) - 1)
        logits = rows[len(kept) - 1]
        produced += len(kept)
        yield from kept
