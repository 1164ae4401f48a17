"""DistributedState: the SequenceState port over layer ranges held by workers.

The workers hold the per-layer arrays; the coordinator keeps what it needs to check
and rebuild them: the tokens, the rolling prefix hash after each position, the
snapshot a payload restore started from, and the history trim not yet sent. EngineSession
sits on top unchanged (docs/adr/0032), so payloads, checkpoints and rewinds behave as
on a local backend. Truncate and trim only change the bookkeeping: the next operation
names the prefix it expects, and each worker cuts its state back to it (or refuses,
and the session is replayed).
"""

from __future__ import annotations

import weakref
from array import array
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.ray.pipeline import Pipeline
from ds4.adapters.compute.ray.stage import WorkItem
from ds4.domain.distributed.prefix_hash import EMPTY, rolling_hashes
from ds4.domain.engine.dsv4_payload import LayerSnapshot, SessionSnapshot
from ds4.ports.compute import SequenceState

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

# history_ok answers fetched per round trip, on each side of the position asked: a
# rewind_floor search walks this far without asking the workers again
_HISTORY_SPAN = 1024


class DistributedState:
    def __init__(self, pipeline: Pipeline, ctx: int) -> None:
        self._pipe = pipeline
        self.ctx = ctx
        self.sid = pipeline.new_sid()
        self._tokens = array("q")
        self._hashes = array("Q", [EMPTY])  # _hashes[n]: hash of the first n tokens
        # a payload restore's starting point: its token count and layers (not the
        # snapshot itself: EngineSession goes on appending to the snapshot's token list)
        self.base: tuple[int, list[LayerSnapshot]] | None = None
        self._trim = 0
        self._history: tuple[int, bytes] | None = None  # (first position, answers)
        weakref.finalize(self, pipeline.release, self.sid)

    # ---- bookkeeping the pipeline reads -----------------------------------

    @property
    def pipeline(self) -> Pipeline:
        return self._pipe

    @property
    def length(self) -> int:
        return len(self._tokens)

    def hash_at(self, n: int) -> int:
        return self._hashes[n]

    def token_array(self, start: int) -> I64:
        return np.asarray(self._tokens[start:], dtype=np.int64)

    def work_item(
        self, pos0: int, prefix_hash: int, tokens: I64, *, reset: bool = False
    ) -> WorkItem:
        return WorkItem(
            self.sid, self.ctx, pos0, prefix_hash, tokens.astype(np.int32), self._trim, reset
        )

    def commit(self, ids: I64) -> None:
        """The workers evaluated ids after the current tokens."""
        tokens = ids.tolist()
        self._hashes.extend(rolling_hashes(self._hashes[-1], tokens))
        self._tokens.extend(tokens)
        self._history = None

    # ---- SequenceState -----------------------------------------------------

    def forward(self, tokens: I64, all_logits: bool) -> F32:
        return self.forward_streams(tokens, all_logits, 0)[0]

    def forward_streams(self, tokens: I64, all_logits: bool, keep: int) -> tuple[F32, F32]:
        ids = np.asarray(tokens, dtype=np.int64).reshape(-1)
        pipe = self._pipe
        every = all_logits or keep > 1  # the final streams of more than the last row

        def op() -> list[F32]:
            return pipe.stream_pieces(self, self.length, ids, want="all" if every else "last")

        pieces = pipe.run(op, [self])
        streams = np.concatenate(pieces) if every else pieces[-1][-1:]
        logits = pipe.head.head(streams if all_logits else streams[-1:])
        self.commit(ids)
        return logits, streams[streams.shape[0] - min(keep, streams.shape[0]) :]

    def truncate(self, n: int) -> None:
        if n >= self.length:
            return
        del self._tokens[n:]
        del self._hashes[n + 1 :]
        if self.base is not None and n < self.base[0]:
            self.base = None  # replays now start from token 0
        self._history = None

    def trim(self, keep_from: int) -> None:
        if keep_from > self._trim:
            self._trim = keep_from  # sent with the next operation
            self._history = None

    def history_ok(self, m: int) -> bool:
        cached = self._history
        if cached is None or not cached[0] <= m < cached[0] + len(cached[1]):
            first = max(0, m - _HISTORY_SPAN + 1)
            ms = list(range(first, min(self.length, m + _HISTORY_SPAN) + 1))
            n, h = self.length, self.hash_at(self.length)

            def op() -> bytes:
                answers = self._pipe.call_all("history_ok", self.sid, n, h, self._trim, ms)
                return bytes(min(column) for column in zip(*answers, strict=True))

            cached = (first, self._pipe.run(op, [self]))
            self._history = cached
        return bool(cached[1][m - cached[0]])

    def snapshot(self, tokens: Sequence[int], logits: F32) -> SessionSnapshot:
        n, h = self.length, self.hash_at(self.length)
        parts = self._pipe.run(lambda: self._pipe.call_all("snapshot", self.sid, n, h), [self])
        return SessionSnapshot(list(tokens), logits, [lay for part in parts for lay in part])

    def restore(self, snapshot: SessionSnapshot) -> None:
        self._tokens = array("q", snapshot.tokens)
        self._hashes = array("Q", [EMPTY, *rolling_hashes(EMPTY, snapshot.tokens)])
        self.base = (len(snapshot.tokens), list(snapshot.layers))
        self._trim = 0
        self._history = None
        self._pipe.run(lambda: self._pipe.rebuild(self), [])

    def clone(self) -> SequenceState:
        copy = DistributedState(self._pipe, self.ctx)
        copy._tokens = array("q", self._tokens)
        copy._hashes = array("Q", self._hashes)
        copy.base = self.base
        copy._trim = self._trim
        n, h = self.length, self.hash_at(self.length)
        self._pipe.run(lambda: self._pipe.call_all("clone", self.sid, n, h, copy.sid), [self])
        return copy

    @property
    def nbytes(self) -> int:
        sizes = self._pipe.run(lambda: self._pipe.call_all("nbytes", self.sid), [])
        return int(sum(sizes)) + self._tokens.itemsize * len(self._tokens) * 2
