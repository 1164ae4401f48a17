"""Teacher-forced negative log-likelihood: how much probability a model gives to a
known continuation, token by token (`ds4 gguf score`, docs/test-vectors.md "Scoring").

- a vector case: its prompt as recorded (local_run.prompt_ids), then each recorded
  token, fed whatever the model would have chosen;
- a text: its tokens without chat markers; the first `warmup` tokens are context only,
  the rest are scored, evaluated in chunks that return every position's logits.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.cancel import CancelCheck, CancelledError, never_cancel
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.loop import prefill
from ds4.domain.sampling.logprobs import StepLogprobs
from ds4.domain.vectors.local_run import Progress, check_fits, no_progress, prompt_ids
from ds4.domain.vectors.records import VectorCase
from ds4.domain.vectors.token_index import TokenIndex
from ds4.ports.compute import ComputeSession
from ds4.ports.tokenizer import Tokenizer


@dataclass(frozen=True)
class ScoredToken:
    case: str
    index: int  # position in the scored continuation (0: the first scored token)
    token_id: int
    raw: bytes
    nll: float


def score_case(
    session: EngineSession,
    tokenizer: Tokenizer,
    index: TokenIndex,
    case: VectorCase,
    *,
    progress: Progress = no_progress,
    cancel: CancelCheck = never_cancel,
) -> list[ScoredToken]:
    targets = []
    for step in case.steps:
        token_id = index.natural(step.token.raw)
        if token_id is None:
            raise Ds4Error(
                f"case {case.id} step {step.index}: no token of this model has the recorded "
                f"bytes {step.token.raw.hex()} (another tokenizer?)"
            )
        targets.append(token_id)
    ids = prompt_ids(tokenizer, case.prompt)
    check_fits(case.id, ids, len(targets), session.ctx)
    done = 0
    for event in prefill(session, ids, cancel=cancel):
        progress(event.done - done)
        done = event.done
    logits = session.logits()
    scored = []
    for position, target in enumerate(targets):
        nll = -StepLogprobs(logits).logprob(target)
        scored.append(ScoredToken(case.id, position, target, tokenizer.token_bytes(target), nll))
        progress(1)
        if position + 1 < len(targets):
            logits = session.eval(target)
    return scored


def text_budget(n_tokens: int, warmup: int, ctx: int) -> int:
    """How many tokens of a text get scored: those after the warmup that fit ctx."""
    if n_tokens <= warmup:
        raise Ds4Error(f"the text has {n_tokens} tokens; scoring needs more than --warmup {warmup}")
    if ctx <= warmup:
        raise Ds4Error(f"--ctx {ctx} leaves nothing to score after --warmup {warmup}")
    return min(n_tokens - warmup, ctx - warmup)


def score_text(
    compute: ComputeSession,
    tokenizer: Tokenizer,
    ids: Sequence[int],
    *,
    name: str,
    warmup: int,
    chunk: int,
    progress: Progress = no_progress,
    cancel: CancelCheck = never_cancel,
) -> Iterator[ScoredToken]:
    """Tokens ids[warmup : warmup + budget], each scored on everything before it.

    The state must be empty and hold ctx >= warmup + budget - 1 tokens. Logits of a
    chunk come from one pass ([chunk, vocab] float32 at a time)."""
    scored = text_budget(len(ids), warmup, compute.ctx)
    end = warmup + scored  # ids[end - 1] is scored but never evaluated
    logits = compute.prefill(list(ids[:warmup]), chunk=chunk)
    progress(warmup)
    yield _scored(tokenizer, name, 0, ids[warmup], logits)
    position = warmup
    while position + 1 < end:
        if cancel():
            raise CancelledError
        piece = list(ids[position : min(position + chunk, end - 1)])
        rows = compute.prefill(piece, all_logits=True)
        for offset, row in enumerate(rows):
            target = position + offset + 1
            yield _scored(tokenizer, name, target - warmup, ids[target], row)
        position += len(piece)
        progress(len(piece))


def _scored(
    tokenizer: Tokenizer, name: str, index: int, token: int, logits: npt.NDArray[np.float32]
) -> ScoredToken:
    nll = -StepLogprobs(logits).logprob(token)
    return ScoredToken(name, index, token, tokenizer.token_bytes(token), nll)
