"""The live session: one token sequence in the engine, with prefix reuse, cancellation,
payloads, checkpoints and the step policies that pace or batch its evaluations.

Over a backend's `SequenceState` (ports/compute.py) the session keeps what is the same
for every backend: the tokens, the logits after the last one, the context bound, the
rewind history (trimmed every 32 tokens to the last `rewind_history` positions), exact
rewind floors, DSV4 payloads and in-memory checkpoints; a decode token goes from `eval`
straight into the state's forward. A runner that is no SequenceState (the scripted
backend, test doubles) hands it a whole `ComputeSession` instead, driven as it is.

Bringing it to a prompt takes two steps (generation.loop.prefill runs them):
`reuse(prompt)` keeps the longest common prefix with the live tokens, cut back to a
point the engine rewinds to exactly (compressed rows and sliding windows make some
positions unsafe), and `extend` evaluates the rest in chunks, checking for
cancellation between them.

Every evaluation is one `Step`: a decode token, a prefill chunk, a pass with every
row's logits (a verified draft block, all_logits), a rewind (which may re-evaluate the
last kept token) or the drafter's proposals. Each `StepPolicy` (the `--power` duty
cycle, the `--sessions N` step gate) is handed the step and the rest of the chain that
runs it, so it can time it, pause after it, or run it in one batch with other
sessions' steps; a policy changes when a step is computed, never its result.

For speculative decoding (docs/mtp.md) a state-backed session keeps, on request
(`retain_streams`), the final HC streams of the last positions, which the MTP drafter
reads; and the rows of a short all-logits evaluation (a verified block), so a rewind
into it takes its logits row instead of evaluating the last kept token again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.cancel import CancelCheck, CancelledError, never_cancel
from ds4.domain.engine.dsv4_payload import (
    check_tokens,
    decode_payload,
    empty_logits,
    encode_payload,
)
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import ComputeSession, SequenceState, StateCheckpoint
from ds4.ports.drafter import Drafter

F32 = npt.NDArray[np.float32]

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


# Per-token history kept for exact rewinds: the last REWIND_HISTORY positions (about
# 0.5 GB across Flash's 43 layers); older rewinds recompute from a checkpoint or token 0.
REWIND_HISTORY = 1024
_TRIM_EVERY = 32
# An all-logits evaluation this short is remembered for free rewinds into it (a
# verified block of drafts is a handful of tokens; a prompt's logits are not kept).
REMEMBER_ROWS = 64


@dataclass(frozen=True)
class StateSpec:
    """What a runner built on a SequenceState hands a new session: how to make an
    empty state for this context; `owner` (the runner) scopes checkpoints: sessions of
    one owner and ctx exchange them."""

    hparams: DeepSeekV4HParams
    new_state: Callable[[], SequenceState]
    ctx: int
    owner: object
    rewind_history: int = REWIND_HISTORY


@dataclass(frozen=True)
class _Checkpoint:
    owner: object  # the runner: checkpoints do not cross runners
    ctx: int
    state: SequenceState
    tokens: tuple[int, ...]
    logits: F32 | None
    restored_at: int | None
    restored_logits: F32 | None
    streams: dict[int, F32]

    @property
    def nbytes(self) -> int:
        return self.state.nbytes

    def rewind_floor(self, n: int) -> int:
        return _rewind_floor(self.state, len(self.tokens), self.restored_at, n)


def _rewind_floor(state: SequenceState, total: int, restored_at: int | None, n: int) -> int:
    """Largest m <= n the state rebuilds exactly: its end, a restored payload's end, a
    point its kept history covers, or 0."""
    m = max(0, min(n, total))
    while m not in (0, total, restored_at) and not state.history_ok(m - 1):
        m -= 1
    return m


class EngineSession:
    def __init__(
        self,
        compute: ComputeSession | StateSpec,
        *,
        chunk: int = 0,
        drafter: Drafter | None = None,
        draft: int = 0,
        policies: Sequence[StepPolicy] = (),
    ) -> None:
        """`compute`: a backend state's spec (the session keeps the bookkeeping), or a
        whole ComputeSession (a double's, or another session), driven as it is.
        `chunk`: prefill chunk size in tokens (0: the engine's choice); `drafter` and
        `draft`: speculative decoding, up to `draft` proposals per step (docs/mtp.md);
        `policies`: what every evaluation goes through, the first outermost."""
        self._double: ComputeSession | None = None
        if isinstance(compute, StateSpec):
            if compute.ctx < 1:
                raise Ds4Error(f"context size must be at least 1, got {compute.ctx}")
            self._hp = compute.hparams
            self._owner = compute.owner
            self._new_state = compute.new_state
            self._ctx = compute.ctx
            self._history = max(1, compute.rewind_history)
            self._keep_streams = 0
            self._clear()
        else:
            self._double = compute
            self._ctx = compute.ctx
        self.configure(chunk=chunk, drafter=drafter, draft=draft, policies=policies)

    @classmethod
    def over(
        cls,
        compute: ComputeSession,
        *,
        chunk: int = 0,
        drafter: Drafter | None = None,
        draft: int = 0,
        policies: Sequence[StepPolicy] = (),
    ) -> EngineSession:
        """The live session over a runner's new session: that session itself, configured,
        when the runner made an EngineSession (a state-backed runner); else a new one."""
        if isinstance(compute, EngineSession):
            compute.configure(chunk=chunk, drafter=drafter, draft=draft, policies=policies)
            return compute
        return cls(compute, chunk=chunk, drafter=drafter, draft=draft, policies=policies)

    def configure(
        self,
        *,
        chunk: int = 0,
        drafter: Drafter | None = None,
        draft: int = 0,
        policies: Sequence[StepPolicy] = (),
    ) -> None:
        """Set the chunk size, drafter and policies (see __init__)."""
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
    def _compute(self) -> ComputeSession:
        """What a Step names as its session: the double, or this session itself (a
        batch of a state-backed runner evaluates into its state)."""
        return self if self._double is None else self._double

    # ---- tokens and the prompt ---------------------------------------------

    @property
    def ctx(self) -> int:
        return self._ctx

    @property
    def tokens(self) -> Sequence[int]:
        if self._double is not None:
            return self._double.tokens
        return tuple(self._tokens)

    @property
    def pos(self) -> int:
        return len(self._tokens) if self._double is None else len(self._double.tokens)

    def common_prefix(self, prompt: Sequence[int]) -> int:
        return common_prefix(self.tokens, prompt)

    def reusable(self, prompt: Sequence[int]) -> int:
        """How many tokens of the live state `reuse(prompt)` would keep (0 for a prompt
        that does not fit); the state is not touched. Several live sessions compare
        this to pick the one a request should continue."""
        return keepable(self.tokens, self.rewind_floor, prompt, self.ctx)

    def reusable_from(self, checkpoint: StateCheckpoint, prompt: Sequence[int]) -> int:
        """`reusable(prompt)` once restored to `checkpoint` (which is not restored)."""
        return keepable(checkpoint.tokens, checkpoint.rewind_floor, prompt, self.ctx)

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
                self.rewind(keep)
            else:
                self.invalidate()
        return keep

    def extend(
        self, tokens: Sequence[int], *, cancel: CancelCheck = never_cancel
    ) -> Iterator[tuple[int, int]]:
        """Evaluate `tokens` chunk by chunk, yielding (done, total) after each chunk.

        cancel() is checked before every chunk; CancelledError leaves the state at
        the last finished chunk.
        """
        for done, total, piece in self._chunks(tokens, cancel):
            _through(self._policies, Step("chunk", self._compute, piece), self._chunk_step)
            yield done, total

    def extend_scored(
        self, tokens: Sequence[int], *, cancel: CancelCheck = never_cancel
    ) -> Iterator[tuple[int, int, F32]]:
        """`extend`, keeping every position's logits: yields (done, total, rows) after
        each chunk, rows[i] the logits after that chunk's i-th token [n, V]. One
        chunk's rows are held at a time (an echoed prompt's log-probabilities)."""
        for done, total, piece in self._chunks(tokens, cancel):
            rows = _through(self._policies, Step("pass", self._compute, piece), self._block)
            yield done, total, rows

    def _chunks(
        self, tokens: Sequence[int], cancel: CancelCheck
    ) -> Iterator[tuple[int, int, list[int]]]:
        """The prefill chunks of `tokens` as (done after it, total, chunk), once they are
        known to fit; cancel() is checked before each (CancelledError)."""
        total = len(tokens)
        if self.pos + total > self.ctx:
            raise Ds4Error(f"{self.pos + total} tokens do not fit the context of {self.ctx}")
        step = self._chunk if self._chunk > 0 else max(total, 1)
        for start in range(0, total, step):
            if cancel():
                raise CancelledError
            piece = list(tokens[start : start + step])
            yield start + len(piece), total, piece

    # ---- evaluation --------------------------------------------------------

    def eval(self, token: int) -> F32:
        """Append one sampled token; Ds4Error when the context is full."""
        if self.pos >= self.ctx:
            raise Ds4Error("context is full")
        if self._policies:
            step = Step("decode", self._compute, (token,))
            return _through(self._policies, step, self._decode_step)
        return self._eval_now(token)  # the plain path builds no Step

    def verify(self, tokens: Sequence[int]) -> F32:
        """Append a sampled token and its drafts in one evaluation; the logits after
        each of them [n, V]. Ds4Error when they do not fit the context."""
        if self.pos + len(tokens) > self.ctx:
            raise Ds4Error("context is full")
        return _through(self._policies, Step("pass", self._compute, list(tokens)), self._block)

    def keep(self, n: int) -> None:
        """Drop the tokens after n (the rejected drafts of the last verification)."""
        if n < self.pos:
            self.rewind(n)

    def all_logits(
        self,
        prompt: Sequence[int],
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelCheck = never_cancel,
    ) -> F32:
        """Evaluate `prompt` from an empty state; logits after every position [n, V]."""
        if not prompt or len(prompt) > self.ctx:
            raise Ds4Error("prompt exceeds context")
        self.invalidate()

        def on_chunk(done: int, total: int) -> None:
            if progress is not None:
                progress(done, total)
            if done < total and cancel():
                raise CancelledError

        step = Step("pass", self._compute, list(prompt), on_chunk)
        return _through(self._policies, step, self._pass)

    def _pass(self, step: Step) -> F32:
        return self.prefill(step.tokens, chunk=self._chunk, progress=step.progress, all_logits=True)

    def _decode_step(self, step: Step) -> F32:
        return self._eval_now(step.tokens[0])

    def _block(self, step: Step) -> F32:
        return self.prefill(step.tokens, progress=step.progress, all_logits=True)

    def _chunk_step(self, step: Step) -> F32:
        return self.prefill(step.tokens)

    def prefill(
        self,
        tokens: Sequence[int],
        *,
        chunk: int = 0,
        progress: ProgressCallback | None = None,
        all_logits: bool = False,
    ) -> F32:
        """ComputeSession.prefill: append tokens in one evaluation, outside the policies
        (what a step runs; benchmarks and scoring call it directly)."""
        if self._double is not None:
            return self._double.prefill(
                tokens, chunk=chunk, progress=progress, all_logits=all_logits
            )
        check_tokens(tokens, len(self._tokens), self._ctx, self._hp.n_vocab)
        ids = np.asarray(tokens, dtype=np.int64).reshape(-1)
        total = int(ids.size)
        if total == 0:
            return np.zeros((0, self._hp.n_vocab), np.float32) if all_logits else self.logits()
        step = chunk if chunk > 0 else total
        pieces = []
        for begin in range(0, total, step):
            pieces.append(self._run_chunk(ids[begin : begin + step], all_logits))
            if progress is not None:
                progress(min(begin + step, total), total)
        if all_logits:
            return np.concatenate(pieces).astype(np.float32)
        return self.logits()

    def _eval_now(self, token: int) -> F32:
        if self._double is not None:
            return self._double.eval(token)
        check_tokens((token,), len(self._tokens), self._ctx, self._hp.n_vocab)
        self._run_chunk(np.array([token], dtype=np.int64), False)
        return self.logits()

    def logits(self) -> F32:
        if self._double is not None:
            return self._double.logits()
        if self._logits is None:
            raise Ds4Error("no logits: the session holds no tokens")
        view = self._logits.view()  # read-only instead of a 0.5 MB copy per token
        view.flags.writeable = False
        return view

    # ---- over the backend state --------------------------------------------

    @property
    def state(self) -> SequenceState:
        """The backend state (for benchmarks and tests that look inside)."""
        if self._double is not None:
            raise Ds4Error("this session runs over a compute double, not a backend state")
        return self._state

    @property
    def holds_state(self) -> bool:
        """Whether the session keeps a backend state (what a drafter needs)."""
        return self._double is None

    def _clear(self) -> None:
        self._tokens: list[int] = []
        self._state = self._new_state()
        self._logits: F32 | None = None
        self._restored_at: int | None = None  # token count of the last payload restore
        self._restored_logits: F32 | None = None
        self._streams: dict[int, F32] = {}  # position -> final HC streams (S, D)
        self._recent: tuple[int, F32] | None = None  # (first position, its logits rows)

    def _run_chunk(self, ids: npt.NDArray[np.int64], all_logits: bool) -> F32:
        start = len(self._tokens)
        if self._keep_streams:
            logits, streams = self._state.forward_streams(ids, all_logits, self._keep_streams)
            self._keep_final_streams(start + ids.size - streams.shape[0], streams)
        else:
            logits = self._state.forward(ids, all_logits)
        self._accept(ids, logits)
        if all_logits and ids.size <= REMEMBER_ROWS:
            self._recent = (start, logits)
        return logits

    def _accept(self, ids: npt.NDArray[np.int64], logits: F32) -> None:
        """Bookkeeping after the state evaluated `ids`: tokens, trims, last logits."""
        self._tokens.extend(ids.tolist())
        keep_from = len(self._tokens) - self._history
        if keep_from > 0 and len(self._tokens) % _TRIM_EVERY < ids.size:
            self._state.trim(keep_from)
            at = self._restored_at
            if at is not None and not self._state.history_ok(at):
                self._restored_at = None  # its rows are gone: no longer a rewind target
        # a one-row result is ours alone: keep it without another 0.5 MB copy
        self._logits = logits[-1] if logits.shape[0] == 1 else logits[-1].copy()
        self._recent = None

    # a batch of sessions (StateRunner.eval_batch): one pass over several states

    def batch_state(self, owner: object, ids: Sequence[int]) -> SequenceState:
        """The state a batched pass evaluates `ids` into; Ds4Error unless this session
        is over a state of `owner` and they fit."""
        if self._double is not None or self._owner is not owner:
            raise Ds4Error("a batch takes sessions of its own model runner only")
        if not ids:
            raise Ds4Error("every session of a batch needs at least one token")
        check_tokens(ids, len(self._tokens), self._ctx, self._hp.n_vocab)
        return self._state

    def batch_done(self, ids: npt.NDArray[np.int64], logits: F32) -> F32:
        """After the batched pass evaluated `ids` into the state: the logits after them."""
        self._accept(ids, logits)
        return self.logits()

    # final streams (for a drafter)

    def retain_streams(self, count: int) -> None:
        """From now on keep the final HC streams of the last `count` positions."""
        if self._double is not None:
            raise Ds4Error("a drafter needs a session over a backend state")
        self._keep_streams = max(0, count)

    def final_stream(self, position: int) -> F32 | None:
        """The final HC streams (S, D) of a kept position, None if not kept. The same
        array object for as long as the position's state is unchanged, so a caller
        can tell whether what it derived from it is still current."""
        return self._streams.get(position) if self._double is None else None

    def _keep_final_streams(self, first: int, streams: F32) -> None:
        rows = np.array(streams, dtype=np.float32)  # ours: the caller's buffer is reused
        rows.flags.writeable = False
        for i in range(rows.shape[0]):
            self._streams[first + i] = rows[i]
        oldest = first + rows.shape[0] - self._keep_streams
        for q in [q for q in self._streams if q < oldest]:
            del self._streams[q]

    def _drop_streams_from(self, n: int) -> None:
        for q in [q for q in self._streams if q >= n]:
            del self._streams[q]

    # ---- rewinds -----------------------------------------------------------

    def rewind_floor(self, n: int) -> int:
        """The largest m <= n the live state rewinds to exactly (0 if none)."""
        if self._double is not None:
            return self._double.rewind_floor(n)
        return _rewind_floor(self._state, len(self._tokens), self._restored_at, n)

    def rewind(self, n: int) -> None:
        """Drop the tokens after n (requires rewind_floor(n) == n); the last kept token
        may be evaluated again for its logits, as a step."""
        _through(self._policies, Step("rewind", self._compute), lambda _: self._rewind_now(n))

    def _rewind_now(self, n: int) -> None:
        if self._double is not None:
            self._double.rewind(n)
            return
        total = len(self._tokens)
        if n < 0 or n > total or self.rewind_floor(n) != n:
            raise Ds4Error(f"cannot rewind exactly to {n} tokens (floor {self.rewind_floor(n)})")
        if n == total:
            return
        if n == 0:
            self._clear()
            return
        recent = self._recent
        if recent is not None and recent[0] < n:  # inside a remembered block: its row
            start, rows = recent
            self._cut(n)
            self._logits = rows[n - start - 1].copy()
            self._recent = (start, rows[: n - start])
            return
        self._recent = None
        if n == self._restored_at:  # the restored state itself, logits from the payload
            self._cut(n)
            self._logits = self._restored_logits
            return
        last = self._tokens[n - 1]
        self._cut(n - 1)
        self._run_chunk(np.array([last], dtype=np.int64), False)

    def _cut(self, n: int) -> None:
        self._state.truncate(n)
        del self._tokens[n:]
        self._drop_streams_from(n)

    def invalidate(self) -> None:
        """Empty the state."""
        if self._double is not None:
            self._double.invalidate()
        else:
            self._clear()

    # ---- checkpoints and payloads ------------------------------------------

    def checkpoint(self) -> StateCheckpoint:
        """An in-memory copy of the whole state (history and logits included)."""
        if self._double is not None:
            return self._double.checkpoint()
        return _Checkpoint(
            self._owner, self._ctx, self._state.clone(), tuple(self._tokens),
            self._logits, self._restored_at, self._restored_logits, dict(self._streams),
        )  # fmt: skip

    def restore(self, checkpoint: StateCheckpoint) -> None:
        """Return to a checkpoint of this runner and context; Ds4Error otherwise."""
        if self._double is not None:
            self._double.restore(checkpoint)
            return
        if not isinstance(checkpoint, _Checkpoint) or checkpoint.owner is not self._owner:
            raise Ds4Error("the checkpoint was taken by a session of another model runner")
        if checkpoint.ctx != self._ctx:
            raise Ds4Error(f"the checkpoint is for context {checkpoint.ctx}, not {self._ctx}")
        self._state = checkpoint.state.clone()  # the checkpoint stays restorable
        self._tokens = list(checkpoint.tokens)
        self._logits = checkpoint.logits
        self._restored_at = checkpoint.restored_at
        self._restored_logits = checkpoint.restored_logits
        self._streams = dict(checkpoint.streams)
        self._recent = None

    def payload(self) -> bytes:
        """The DSV4 payload of the current state (logits included): what a `.kv` file holds."""
        if self._double is not None:
            return self._double.payload()
        logits = self._logits if self._logits is not None else empty_logits(self._hp)
        return encode_payload(self._hp, self._ctx, self._state.snapshot(self._tokens, logits))

    def load_payload(self, payload: bytes) -> None:
        """Restore a payload; on a bad one the state is emptied and Ds4Error raised."""
        try:
            self._load_payload(payload)
        except Ds4Error:
            self.invalidate()
            raise

    def _load_payload(self, data: bytes) -> None:
        if self._double is not None:
            self._double.load_payload(data)
            return
        snap = decode_payload(self._hp, self._ctx, bytes(data))
        state = self._new_state()
        state.restore(snap)
        self._state = state
        self._tokens = snap.tokens
        self._logits = snap.logits if snap.tokens else None
        self._restored_at = len(snap.tokens)
        self._restored_logits = self._logits
        self._streams = {}
        self._recent = None
