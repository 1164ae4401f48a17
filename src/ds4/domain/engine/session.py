"""The live session: one ComputeSession plus prefix reuse, cancellation, payloads and the
step policies that pace or batch its evaluations.

The one domain wrapper of the compute port. Bringing it to a prompt takes two steps
(generation.loop.prefill runs them): `reuse(prompt)` keeps the longest common prefix
with the live tokens, cut back to a point the engine can rewind to exactly
(compressed rows and sliding windows make some positions unsafe), and `extend`
evaluates the rest in chunks, checking for cancellation between them. Payloads
(`payload`/`load_payload`) are what the disk KV cache writes and reads; checkpoints
(`checkpoint`/`restore`) what the server's in-memory store keeps.

Every evaluation the session runs is one `Step`: a decode token, a prefill chunk, a
pass with every row's logits (a verified draft block, all_logits), a rewind (which may
re-evaluate the last kept token) or the drafter's proposals. Without policies the step
is a plain call into the compute session. Each `StepPolicy` (the `--power` duty cycle,
the `--sessions N` step gate) is handed the step and the rest of the chain that runs
it, so it can time it, pause after it, or run it in one batch with other sessions'
steps; a policy changes when and with what a step is computed, never its result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.cancel import CancelCheck, CancelledError, never_cancel
from ds4.domain.errors import Ds4Error
from ds4.ports.compute import ComputeSession, StateCheckpoint
from ds4.ports.drafter import Drafter

ProgressCallback = Callable[[int, int], None]
T = TypeVar("T")
StepKind = Literal["decode", "chunk", "pass", "rewind", "draft"]


@dataclass(frozen=True)
class Step:
    """One evaluation a session is about to run into `compute`: `tokens` it appends
    (a rewind and a draft append none); a "pass" reports each of its chunks to
    `progress`, which a policy may wrap."""

    kind: StepKind
    compute: ComputeSession
    tokens: Sequence[int] = ()
    progress: ProgressCallback | None = None

    def with_progress(self, progress: ProgressCallback) -> Step:
        return replace(self, progress=progress)


class StepPolicy(Protocol):
    def around(self, step: Step, proceed: Callable[[Step], T]) -> T:
        """Run `step` through `proceed` (the rest of the chain, then the compute call),
        or have it run in one batch with other sessions' steps; return what it gives."""
        ...


def _through(policies: Sequence[StepPolicy], step: Step, run: Callable[[Step], T]) -> T:
    """`run(step)` with the policies around it, the first outermost."""
    if not policies:
        return run(step)
    first, rest = policies[0], policies[1:]
    return first.around(step, lambda inner: _through(rest, inner, run))


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def keepable(
    held: Sequence[int], rewind_floor: Callable[[int], int], prompt: Sequence[int], ctx: int
) -> int:
    """How many tokens of a state holding `held` (rewinding exactly to `rewind_floor`'s
    points) bringing it to `prompt` keeps: the common prefix, cut to an exact rewind
    point, less one when the prompt ends inside the state (the logits after its last
    token are gone, so it is evaluated again). 0 for a prompt that does not fit."""
    if not prompt or len(prompt) >= ctx:
        return 0
    live = len(held)
    keep = common_prefix(held, prompt)
    if keep == len(prompt) and live == keep:
        return keep  # the state is exactly the prompt: its logits are current
    if keep == len(prompt):
        keep -= 1
    if keep < live:
        keep = rewind_floor(keep)
    return keep


class EngineSession:
    def __init__(
        self,
        compute: ComputeSession,
        *,
        chunk: int = 0,
        drafter: Drafter | None = None,
        draft: int = 0,
        policies: Sequence[StepPolicy] = (),
    ) -> None:
        """`chunk`: prefill chunk size in tokens (0: the engine's choice); `drafter` and
        `draft`: speculative decoding, up to `draft` proposals per step (docs/mtp.md);
        `policies`: what every evaluation goes through, the first outermost."""
        self._compute = compute
        self._chunk = chunk
        self._drafter = drafter if draft > 0 else None
        self._draft = draft if drafter is not None else 0
        self._policies = tuple(policies)

    @property
    def policies(self) -> tuple[StepPolicy, ...]:
        return self._policies

    def draft(self, token: int, limit: int) -> list[int]:
        """The drafter's proposals after `token` (at most `limit`; none without one)."""
        drafter = self._drafter
        if drafter is None:
            return []
        step = Step("draft", self._compute)
        return _through(self._policies, step, lambda _: drafter.draft(token, limit))

    @property
    def drafter(self) -> Drafter | None:
        return self._drafter

    @property
    def draft_limit(self) -> int:
        """Most proposals per verification (0: no speculative decoding)."""
        return self._draft

    @property
    def ctx(self) -> int:
        return self._compute.ctx

    @property
    def tokens(self) -> Sequence[int]:
        return self._compute.tokens

    @property
    def pos(self) -> int:
        return len(self._compute.tokens)

    def common_prefix(self, prompt: Sequence[int]) -> int:
        return common_prefix(self._compute.tokens, prompt)

    def reusable(self, prompt: Sequence[int]) -> int:
        """How many tokens of the live state `reuse(prompt)` would keep (0 for a prompt
        that does not fit); the state is not touched. Several live sessions compare
        this to pick the one a request should continue."""
        return keepable(self._compute.tokens, self._compute.rewind_floor, prompt, self.ctx)

    def reusable_from(self, checkpoint: StateCheckpoint, prompt: Sequence[int]) -> int:
        """`reusable(prompt)` once restored to `checkpoint` (which is not restored)."""
        return keepable(checkpoint.tokens, checkpoint.rewind_floor, prompt, self.ctx)

    def rewind_floor(self, n: int) -> int:
        """The largest m <= n the live state rewinds to exactly."""
        return self._compute.rewind_floor(n)

    def reuse(self, prompt: Sequence[int]) -> int:
        """Cut the state back to the longest part of `prompt` it can keep; return its length.

        The rest, prompt[result:], is what `extend` must evaluate; it is empty only
        when the state already holds exactly `prompt` (its logits are then current).
        """
        if not prompt or len(prompt) >= self.ctx:
            raise Ds4Error("prompt exceeds context")
        keep = self.reusable(prompt)
        if keep < self.pos:
            if keep > 0:
                self._rewind(keep)
            else:
                self._compute.invalidate()
        return keep

    def _rewind(self, n: int) -> None:
        step = Step("rewind", self._compute)
        _through(self._policies, step, lambda s: s.compute.rewind(n))

    def extend(
        self, tokens: Sequence[int], *, cancel: CancelCheck = never_cancel
    ) -> Iterator[tuple[int, int]]:
        """Evaluate `tokens` chunk by chunk, yielding (done, total) after each chunk.

        cancel() is checked before every chunk; CancelledError leaves the state at
        the last finished chunk.
        """
        total = len(tokens)
        if self.pos + total > self.ctx:
            raise Ds4Error(f"{self.pos + total} tokens do not fit the context of {self.ctx}")
        step = self._chunk if self._chunk > 0 else max(total, 1)
        done = 0
        while done < total:
            if cancel():
                raise CancelledError
            piece = list(tokens[done : done + step])
            _through(self._policies, Step("chunk", self._compute, piece), _prefill)
            done += len(piece)
            yield done, total

    def eval(self, token: int) -> npt.NDArray[np.float32]:
        """Append one sampled token; Ds4Error when the context is full."""
        if self.pos >= self.ctx:
            raise Ds4Error("context is full")
        if self._policies:
            return _through(self._policies, Step("decode", self._compute, (token,)), _eval)
        return self._compute.eval(token)  # the plain path builds no Step

    def verify(self, tokens: Sequence[int]) -> npt.NDArray[np.float32]:
        """Append a sampled token and its drafts in one evaluation; the logits after
        each of them [n, V]. Ds4Error when they do not fit the context."""
        if self.pos + len(tokens) > self.ctx:
            raise Ds4Error("context is full")
        return _through(self._policies, Step("pass", self._compute, list(tokens)), _block)

    def keep(self, n: int) -> None:
        """Drop the tokens after n (the rejected drafts of the last verification)."""
        if n < self.pos:
            self._rewind(n)

    def logits(self) -> npt.NDArray[np.float32]:
        return self._compute.logits()

    def all_logits(
        self,
        prompt: Sequence[int],
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelCheck = never_cancel,
    ) -> npt.NDArray[np.float32]:
        """Evaluate `prompt` from an empty state; logits after every position [n, V]."""
        if not prompt or len(prompt) > self.ctx:
            raise Ds4Error("prompt exceeds context")
        self._compute.invalidate()

        def on_chunk(done: int, total: int) -> None:
            if progress is not None:
                progress(done, total)
            if done < total and cancel():
                raise CancelledError

        step = Step("pass", self._compute, list(prompt), on_chunk)
        return _through(self._policies, step, self._pass)

    def _pass(self, step: Step) -> npt.NDArray[np.float32]:
        return step.compute.prefill(
            step.tokens, chunk=self._chunk, progress=step.progress, all_logits=True
        )

    def invalidate(self) -> None:
        self._compute.invalidate()

    def checkpoint(self) -> StateCheckpoint:
        """An in-memory copy of the whole state (history and logits included)."""
        return self._compute.checkpoint()

    def restore(self, checkpoint: StateCheckpoint) -> None:
        """Return to a checkpoint of this runner and context; Ds4Error otherwise."""
        self._compute.restore(checkpoint)

    def payload(self) -> bytes:
        """The DSV4 payload of the current state (logits included): what a `.kv` file holds."""
        return self._compute.payload()

    def load_payload(self, payload: bytes) -> None:
        """Restore a payload; on a bad one the state is emptied and Ds4Error raised."""
        try:
            self._compute.load_payload(payload)
        except Ds4Error:
            self._compute.invalidate()
            raise


def _eval(step: Step) -> npt.NDArray[np.float32]:
    return step.compute.eval(step.tokens[0])


def _block(step: Step) -> npt.NDArray[np.float32]:
    return step.compute.prefill(step.tokens, progress=step.progress, all_logits=True)


def _prefill(step: Step) -> npt.NDArray[np.float32]:
    return step.compute.prefill(step.tokens)
