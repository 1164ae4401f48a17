"""One case on the local model: the prompt as the vectors were recorded (one user
message, empty system text, thinking disabled: BOS, <｜User｜>, prompt, <｜Assistant｜>,
</think>), prefilled, then greedy steps that always continue on the local argmax.

`check_case` compares each step with the recording (judge.py); `record_case` writes
the steps down in the recorded form, which is how vectors are made from a local model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ds4.domain.chat.messages import ThinkMode, UserMessage
from ds4.domain.chat.renderer import render_chat
from ds4.domain.engine.cancel import CancelCheck, never_cancel
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.loop import prefill
from ds4.domain.sampling.logprobs import StepLogprobs
from ds4.domain.sampling.sampler import argmax
from ds4.domain.vectors.judge import DEFAULT_TOLERANCE, LocalToken, StepReport, judge_step
from ds4.domain.vectors.records import Alternative, VectorCase, VectorStep, VectorToken
from ds4.domain.vectors.token_index import TokenIndex
from ds4.ports.tokenizer import Tokenizer

Progress = Callable[[int], None]  # called with the number of tokens just evaluated


def no_progress(_done: int) -> None:
    return None


def prompt_ids(tokenizer: Tokenizer, prompt: str) -> list[int]:
    """The chat encoding the recordings were made with."""
    return tokenizer.encode(render_chat([UserMessage(content=prompt)], (), ThinkMode.NONE))


def check_fits(case_id: str, ids: Sequence[int], steps: int, ctx: int) -> None:
    # The last step's token is never evaluated: n + steps - 1 positions are used.
    if len(ids) >= ctx or len(ids) + steps - 1 > ctx:
        raise Ds4Error(
            f"case {case_id}: {len(ids)} prompt tokens and {steps} steps do not fit a "
            f"session of {ctx} tokens"
        )


def greedy_steps(
    session: EngineSession,
    ids: Sequence[int],
    steps: int,
    *,
    progress: Progress = no_progress,
    cancel: CancelCheck = never_cancel,
) -> Iterator[StepLogprobs]:
    """Prefill `ids`, then each step's log-probabilities; after a step is consumed
    its argmax is evaluated (except after the last)."""
    done = 0
    for event in prefill(session, ids, cancel=cancel):
        progress(event.done - done)
        done = event.done
    logits = session.logits()
    for index in range(steps):
        yield StepLogprobs(logits)
        progress(1)
        if index + 1 < steps:
            logits = session.eval(argmax(logits))


def local_token(tokenizer: Tokenizer, step: StepLogprobs, token_id: int) -> LocalToken:
    ranked = step.token(token_id)
    return LocalToken(token_id, tokenizer.token_bytes(token_id), ranked.logprob, ranked.rank)


def local_top(tokenizer: Tokenizer, step: StepLogprobs, k: int) -> list[LocalToken]:
    return [LocalToken(r.id, tokenizer.token_bytes(r.id), r.logprob, r.rank) for r in step.top(k)]


@dataclass(frozen=True)
class CaseReport:
    case: VectorCase
    prompt_tokens: int  # local count; the recording's is case.prompt_tokens
    steps: tuple[StepReport, ...]

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.steps)

    @property
    def first_failure(self) -> int | None:
        return next((s.index for s in self.steps if not s.passed), None)

    @property
    def max_abs_delta(self) -> float | None:
        deltas = [d for s in self.steps if (d := s.max_abs_delta) is not None]
        return max(deltas) if deltas else None


def check_case(
    session: EngineSession,
    tokenizer: Tokenizer,
    index: TokenIndex,
    case: VectorCase,
    *,
    top_k: int,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: Progress = no_progress,
    cancel: CancelCheck = never_cancel,
) -> CaseReport:
    ids = prompt_ids(tokenizer, case.prompt)
    check_fits(case.id, ids, len(case.steps), session.ctx)
    reports = []
    steps = greedy_steps(session, ids, len(case.steps), progress=progress, cancel=cancel)
    for recorded, logprobs in zip(case.steps, steps, strict=True):
        lookup = {}
        for raw in {recorded.token.raw, *(a.token.raw for a in recorded.compared)}:
            candidates = [local_token(tokenizer, logprobs, i) for i in index.ids(raw)]
            if candidates:
                lookup[raw] = min(candidates, key=lambda t: t.rank)
        top = local_top(tokenizer, logprobs, top_k)
        reports.append(judge_step(recorded, top, lookup, tolerance))
    return CaseReport(case, len(ids), tuple(reports))


def record_case(
    session: EngineSession,
    tokenizer: Tokenizer,
    case: VectorCase,
    steps: int,
    *,
    top_k: int,
    progress: Progress = no_progress,
    cancel: CancelCheck = never_cancel,
) -> tuple[int, tuple[VectorStep, ...]]:
    """The prompt's token count and `steps` greedy steps with their top-k alternatives,
    in the recorded form (real logprobs; none is the API's -9999 placeholder)."""
    ids = prompt_ids(tokenizer, case.prompt)
    check_fits(case.id, ids, steps, session.ctx)
    recorded = []
    for index, logprobs in enumerate(
        greedy_steps(session, ids, steps, progress=progress, cancel=cancel)
    ):
        top = local_top(tokenizer, logprobs, top_k)
        alternatives = tuple(Alternative(_token(t.raw), t.logprob) for t in top)
        recorded.append(VectorStep(index, _token(top[0].raw), top[0].logprob, alternatives))
    return len(ids), tuple(recorded)


def _token(raw: bytes) -> VectorToken:
    return VectorToken(raw, raw.decode("utf-8", errors="replace"))
