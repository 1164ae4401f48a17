"""StateSession: the ComputeSession every backend offers, over its SequenceState.

The backend keeps the per-layer arrays; this keeps what is the same for all of them:
the token list, the logits after the last token, the context bound, the bounded rewind
history (trimmed every 32 tokens to the last `rewind_history` positions), exact rewind
floors, DSV4 payloads through the shared codec, and in-memory checkpoints.

For speculative decoding (docs/mtp.md) it also keeps, on request (`retain_streams`),
the final HC streams of the last few positions, which the MTP drafter reads; and the
logits of a short all-logits evaluation (a verified draft block), so a rewind into that
block takes its logits row instead of re-evaluating the last kept token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.dsv4_payload import (
    check_tokens,
    decode_payload,
    empty_logits,
    encode_payload,
)
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import ComputeSession, SequenceState, StateCheckpoint

F32 = npt.NDArray[np.float32]

# Per-token history kept for exact rewinds: the last REWIND_HISTORY positions (about
# 0.5 GB across Flash's 43 layers); older rewinds recompute from a checkpoint or token 0.
REWIND_HISTORY = 1024
_TRIM_EVERY = 32
# An all-logits evaluation this short is remembered for free rewinds into it (a
# verified block of drafts is a handful of tokens; a prompt's logits are not kept).
REMEMBER_ROWS = 64


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


class StateSession:
    def __init__(
        self,
        hp: DeepSeekV4HParams,
        new_state: Callable[[], SequenceState],
        ctx: int,
        *,
        owner: object,
        rewind_history: int = REWIND_HISTORY,
    ) -> None:
        """`new_state` makes an empty backend state for this context; `owner` (the
        runner) scopes checkpoints: sessions of one owner and ctx exchange them."""
        if ctx < 1:
            raise Ds4Error(f"context size must be at least 1, got {ctx}")
        self._hp = hp
        self._owner = owner
        self._new_state = new_state
        self._ctx = ctx
        self._history = max(1, rewind_history)
        self._keep_streams = 0
        self.invalidate()

    # ---- state -------------------------------------------------------------

    @property
    def ctx(self) -> int:
        return self._ctx

    @property
    def tokens(self) -> Sequence[int]:
        return tuple(self._tokens)

    @property
    def state(self) -> SequenceState:
        """The backend state (for benchmarks and tests that look inside)."""
        return self._state

    def invalidate(self) -> None:
        self._tokens: list[int] = []
        self._state = self._new_state()
        self._logits: F32 | None = None
        self._restored_at: int | None = None  # token count of the last payload restore
        self._restored_logits: F32 | None = None
        self._streams: dict[int, F32] = {}  # position -> final HC streams (S, D)
        self._recent: tuple[int, F32] | None = None  # (first position, its logits rows)

    # ---- final streams (for a drafter) ------------------------------------------

    def retain_streams(self, count: int) -> None:
        """From now on keep the final HC streams of the last `count` positions."""
        self._keep_streams = max(0, count)

    def final_stream(self, position: int) -> F32 | None:
        """The final HC streams (S, D) of a kept position, None if not kept. The same
        array object for as long as the position's state is unchanged, so a caller
        can tell whether what it derived from it is still current."""
        return self._streams.get(position)

    def _drop_streams_from(self, n: int) -> None:
        for q in [q for q in self._streams if q >= n]:
            del self._streams[q]

    def logits(self) -> F32:
        if self._logits is None:
            raise Ds4Error("no logits: the session holds no tokens")
        view = self._logits.view()  # read-only instead of a 0.5 MB copy per token
        view.flags.writeable = False
        return view

    # ---- evaluation --------------------------------------------------------

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

    def _keep_final_streams(self, first: int, streams: F32) -> None:
        rows = np.array(streams, dtype=np.float32)  # ours: the caller's buffer is reused
        rows.flags.writeable = False
        for i in range(rows.shape[0]):
            self._streams[first + i] = rows[i]
        oldest = first + rows.shape[0] - self._keep_streams
        for q in [q for q in self._streams if q < oldest]:
            del self._streams[q]

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

    def prefill(
        self,
        tokens: Sequence[int],
        *,
        chunk: int = 0,
        progress: Callable[[int, int], None] | None = None,
        all_logits: bool = False,
    ) -> F32:
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

    def eval(self, token: int) -> F32:
        check_tokens((token,), len(self._tokens), self._ctx, self._hp.n_vocab)
        self._run_chunk(np.array([token], dtype=np.int64), False)
        return self.logits()

    # ---- rewind ------------------------------------------------------------

    def rewind_floor(self, n: int) -> int:
        return _rewind_floor(self._state, len(self._tokens), self._restored_at, n)

    def rewind(self, n: int) -> None:
        """Drop tokens after n; the last kept token is re-evaluated to restore its logits."""
        total = len(self._tokens)
        if n < 0 or n > total or self.rewind_floor(n) != n:
            raise Ds4Error(f"cannot rewind exactly to {n} tokens (floor {self.rewind_floor(n)})")
        if n == total:
            return
        if n == 0:
            self.invalidate()
            return
        recent = self._recent
        if recent is not None and recent[0] < n:  # inside a remembered block: its row
            start, rows = recent
            self._state.truncate(n)
            del self._tokens[n:]
            self._drop_streams_from(n)
            self._logits = rows[n - start - 1].copy()
            self._recent = (start, rows[: n - start])
            return
        self._recent = None
        if n == self._restored_at:  # the restored state itself, logits from the payload
            self._state.truncate(n)
            del self._tokens[n:]
            self._drop_streams_from(n)
            self._logits = self._restored_logits
            return
        last = self._tokens[n - 1]
        self._state.truncate(n - 1)
        del self._tokens[n - 1 :]
        self._drop_streams_from(n - 1)
        self._run_chunk(np.array([last], dtype=np.int64), False)

    # ---- snapshots ---------------------------------------------------------

    def payload(self) -> bytes:
        logits = self._logits if self._logits is not None else empty_logits(self._hp)
        return encode_payload(self._hp, self._ctx, self._state.snapshot(self._tokens, logits))

    def load_payload(self, data: bytes) -> None:
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

    def checkpoint(self) -> StateCheckpoint:
        return _Checkpoint(
            self._owner, self._ctx, self._state.clone(), tuple(self._tokens),
            self._logits, self._restored_at, self._restored_logits, dict(self._streams),
        )  # fmt: skip

    def restore(self, checkpoint: StateCheckpoint) -> None:
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


# (states, ids per state) -> logits after each state's last id, one (1, V) array each
BatchForward = Callable[[Sequence[SequenceState], Sequence[npt.NDArray[np.int64]]], list[F32]]


def eval_together(
    sessions: Sequence[ComputeSession],
    tokens: Sequence[Sequence[int]],
    forward: BatchForward,
    *,
    owner: object,
) -> list[F32]:
    """Append tokens[i] to sessions[i] for every i in one pass of the backend (`forward`
    evaluates all states together); the logits after each session's last token.

    Every session must be a distinct StateSession of `owner` with a non-empty list; all
    are checked before anything is evaluated, and a failed pass changes none of them.
    """
    if len(sessions) != len(tokens):
        raise Ds4Error(f"{len(sessions)} sessions but {len(tokens)} token lists")
    mine: list[StateSession] = []
    for s, ids in zip(sessions, tokens, strict=True):
        if not isinstance(s, StateSession) or s._owner is not owner:
            raise Ds4Error("a batch takes sessions of its own model runner only")
        if any(s is other for other in mine):
            raise Ds4Error("a session appears twice in one batch")
        if not ids:
            raise Ds4Error("every session of a batch needs at least one token")
        check_tokens(ids, len(s._tokens), s._ctx, s._hp.n_vocab)
        mine.append(s)
    arrays = [np.asarray(ids, dtype=np.int64).reshape(-1) for ids in tokens]
    logits = forward([s._state for s in mine], arrays)
    for s, chunk, rows in zip(mine, arrays, logits, strict=True):
        s._accept(chunk, rows)
    return [s.logits() for s in mine]


def eval_one_by_one(
    sessions: Sequence[ComputeSession], tokens: Sequence[Sequence[int]]
) -> list[F32]:
    """eval_batch for runners that cannot batch (test doubles): each session in turn."""
    if len(sessions) != len(tokens):
        raise Ds4Error(f"{len(sessions)} sessions but {len(tokens)} token lists")
    return [s.prefill(list(ids)) for s, ids in zip(sessions, tokens, strict=True)]
