"""Checking recorded vectors on the local model (docs/test-vectors.md): recorded tokens
matched to ours by their bytes, the comparison rule for one step, and one case run as the
vectors were recorded (prefilled, then greedy steps on the local argmax).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ds4.domain.chat import ThinkMode, UserMessage, render_chat
from ds4.domain.engine.cancel import CancelCheck, never_cancel
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.loop import prefill
from ds4.domain.sampling import StepLogprobs, argmax
from ds4.domain.vectors.records import Alternative, VectorCase, VectorStep, VectorToken
from ds4.ports.tokenizer import Tokenizer

# --- judge ---
# The comparison rule for one step (docs/test-vectors.md "The rule"):
#
# - the local argmax token's bytes equal the recorded selected token's bytes;
# - every ranked recorded alternative (logprob above -1000, non-empty bytes) has a local
#   top-k entry with identical bytes whose logprob is within `tolerance` of it.
#
# The report carries more than the verdict: where the recorded token ranks in the local
# model's whole vocabulary and how far every alternative's logprob moved.

DEFAULT_TOLERANCE = 4.0


@dataclass(frozen=True)
class LocalToken:
    """A token as the local model scores it at one step."""

    id: int
    raw: bytes
    logprob: float
    rank: int  # 1-based, over the whole vocabulary (ties by id)


@dataclass(frozen=True)
class AlternativeCheck:
    token: VectorToken
    recorded: float
    local: LocalToken | None  # the best-ranked local token with these bytes; None: none has
    ok: bool

    @property
    def delta(self) -> float | None:
        return None if self.local is None else self.local.logprob - self.recorded


@dataclass(frozen=True)
class VectorStepReport:
    index: int
    recorded: VectorToken
    recorded_logprob: float
    recorded_local: LocalToken | None  # the recorded token in the local model's ranking
    chosen: LocalToken  # the local argmax, which the next step continues from
    alternatives: tuple[AlternativeCheck, ...]

    @property
    def argmax_ok(self) -> bool:
        return self.chosen.raw == self.recorded.raw

    @property
    def passed(self) -> bool:
        return self.argmax_ok and all(a.ok for a in self.alternatives)

    @property
    def max_abs_delta(self) -> float | None:
        deltas = [abs(d) for a in self.alternatives if (d := a.delta) is not None]
        return max(deltas) if deltas else None

    def problems(self, top_k: int, tolerance: float) -> list[str]:
        out = []
        if not self.argmax_ok:
            out.append("argmax differs")
        for alt in self.alternatives:
            if alt.ok:
                continue
            shown = _show(alt.token.raw)
            if alt.local is None:
                out.append(f"{shown}: no local token has these bytes")
            elif alt.local.rank > top_k:
                out.append(f"{shown}: local rank {alt.local.rank}, not in the top {top_k}")
            else:
                out.append(f"{shown}: |Δlogprob| {abs(alt.delta or 0.0):.3f} > {tolerance:g}")
        return out


def judge_step(
    step: VectorStep,
    top: Sequence[LocalToken],
    lookup: Mapping[bytes, LocalToken],
    tolerance: float = DEFAULT_TOLERANCE,
) -> VectorStepReport:
    """`top`: the local top-k, best first; `lookup`: the best-ranked local token for each
    recorded byte string that some local token has."""
    checks = tuple(
        AlternativeCheck(
            alt.token,
            alt.logprob,
            lookup.get(alt.token.raw),
            any(t.raw == alt.token.raw and abs(t.logprob - alt.logprob) <= tolerance for t in top),
        )
        for alt in step.compared
    )
    return VectorStepReport(
        step.index, step.token, step.logprob, lookup.get(step.token.raw), top[0], checks
    )


def _show(raw: bytes) -> str:
    return repr(raw.decode("utf-8", errors="backslashreplace"))


# --- token index ---
# Token bytes to token ids: recorded tokens are matched by their bytes, never by id
# (the recording model's ids need not be ours).


class TokenIndex:
    def __init__(self, tokenizer: Tokenizer) -> None:
        by_bytes: dict[bytes, list[int]] = {}
        for token_id in range(tokenizer.vocab_size):
            raw = tokenizer.token_bytes(token_id)
            if raw:
                by_bytes.setdefault(raw, []).append(token_id)
        # Ordinary tokens before added ones: a text with these bytes is fed as the former.
        self._ids = {
            raw: tuple(sorted(ids, key=lambda i: (tokenizer.is_added(i), i)))
            if len(ids) > 1
            else (ids[0],)
            for raw, ids in by_bytes.items()
        }

    def ids(self, raw: bytes) -> tuple[int, ...]:
        """Every id whose bytes are `raw` (usually one), ordinary tokens first."""
        return self._ids.get(raw, ())

    def natural(self, raw: bytes) -> int | None:
        """The id a text with these bytes is fed as; None when no token has them."""
        ids = self._ids.get(raw, ())
        return ids[0] if ids else None


# --- local run ---
# One case on the local model: the prompt as the vectors were recorded (one user
# message, empty system text, thinking disabled: BOS, <｜User｜>, prompt, <｜Assistant｜>,
# </think>), prefilled, then greedy steps that always continue on the local argmax.
#
# `check_case` compares each step with the recording (`judge_step` above); `record_case` writes
# the steps down in the recorded form, which is how vectors are made from a local model.

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
    steps: tuple[VectorStepReport, ...]

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
