"""The coordinator's side of a layer-split model (docs/distributed.md): the Pipeline that
pushes hidden streams through the chain of layer-range workers, and DistributedState,
the SequenceState port whose per-layer arrays those workers hold.
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.cpu.native_forward import NativeForward
from ds4.adapters.compute.ray.stage import StageRefusedError, StageReport, WorkItem
from ds4.domain.dist_transport import (
    DEFAULT_ACTIVATION_BITS,
    HopRecord,
    PackedRows,
    check_bits,
    decode,
    encode,
    hop_gaps,
)
from ds4.domain.distributed import EMPTY, extend_hash, range_text, rolling_hashes
from ds4.domain.engine.dsv4_payload import LayerSnapshot, SessionSnapshot
from ds4.domain.errors import ComputeUnavailableError, Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import SequenceState

# --- The pipeline ---------------------------------------------------------------------
# The coordinator's side of a layer-split model: pushes hidden streams through the
# chain of layer-range workers, checks the session invariant, replays sessions a worker
# no longer holds, and turns a lost worker into a clean error and a re-placed range
# (docs/distributed.md).
#
# The workers are reached through `Stages` (runner.py's RayStages puts them in Ray actors; the
# tests also run them in-process). A pass submits one `forward` per range, each taking
# the previous range's output; with the `refs` transport the whole chain is submitted
# at once and Ray hands each output to the next worker as an object ref, so several
# prefill pieces are in flight together (piece k+1 on range 1 while piece k is on range
# 2). The `values` transport fetches each range's output before calling the next.

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
T = TypeVar("T")
Transport = Literal["refs", "values"]
HopObserver = Callable[[HopRecord], None]


class WorkerLostError(ComputeUnavailableError):
    """A layer-range worker died or stopped answering; the request that was using it
    fails, and the next operation re-places the range and replays its sessions."""


class StageLostError(Exception):
    """Raised by Stages.get: worker k is gone (died, unreachable, timed out)."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(reason)
        self.index = index
        self.reason = reason


class Stages(Protocol):
    """The layer-range workers, in layer order."""

    @property
    def ranges(self) -> Sequence[range]: ...

    def submit(self, k: int, method: str, *args: Any, num_returns: int = 1) -> Any:
        """Call LayerStage.method on worker k without waiting; args may be pending
        results of earlier calls (resolved before the call runs). Returns the pending
        result (a tuple of num_returns pending results when > 1)."""
        ...

    def get(self, k: int, pending: Any) -> Any:
        """The value of a pending result of worker k. Raises StageRefusedError (the worker
        does not hold the named prefix), Ds4Error (the worker reported an error) or
        StageLostError (the worker is gone)."""
        ...

    def describe(self, k: int) -> str:
        """Where worker k runs (for messages)."""
        ...

    def replace(self, k: int) -> None:
        """Start a new worker for range k (the old one is gone); Ds4Error if impossible."""
        ...


@dataclass(frozen=True)
class PipelineOptions:
    piece: int = 256  # tokens per pipelined prefill piece
    window: int = 0  # pieces in flight at once (0: ranges + 2, at most 8)
    transport: Transport = "refs"
    activation_bits: int = DEFAULT_ACTIVATION_BITS  # hidden states across a boundary


@dataclass(frozen=True)
class PassInfo:
    """What a pass is, for its telemetry."""

    op: str  # prefill | decode | batch | replay
    piece: int
    pos: int


@dataclass
class _Pass:
    final: Any  # the last range's output streams (pending, or a value with `values`)
    reports: list[Any]  # each range's StageReport (pending)
    want: bool  # keep the output streams (for logits)
    info: PassInfo
    tokens: int
    bytes_in: int  # the packed embedding sent to the first range
    submitted: float  # time.time() before the first call


class Pipeline:
    def __init__(
        self,
        hp: DeepSeekV4HParams,
        stages: Stages,
        head: NativeForward,
        options: PipelineOptions = PipelineOptions(),
    ) -> None:
        """`head` holds the embedding and output head (a NativeForward without layers)."""
        if options.piece < 1:
            raise Ds4Error(f"prefill piece {options.piece}: use at least 1 token")
        self.hp = hp
        self.stages = stages
        self.head = head
        self.options = options
        self.window = options.window or min(len(stages.ranges) + 2, 8)
        self.replays = 0  # sessions replayed (tests and the bench read it)
        self.bytes_sent = 0  # hidden-state bytes handed between processes (the bench reads it)
        self.bits = check_bits(options.activation_bits)
        self.passes = 0  # passes through the chain (the trace numbers them)
        # each hop's telemetry goes to these (--dist-trace, the server's /metrics, bench)
        self.observers: list[HopObserver] = []
        self._lock = threading.RLock()  # one operation on the workers at a time
        self._dead: set[int] = set()
        # deque and count: appended to from finalizers, which must not take a lock
        self._freed: deque[int] = deque()
        self._sids = itertools.count(1)

    # ---- session ids -------------------------------------------------------

    def new_sid(self) -> int:
        return next(self._sids)

    def release(self, sid: int) -> None:
        """A session object went away: its worker-side state is dropped with the next
        operation (no remote call from a finalizer)."""
        self._freed.append(sid)

    # ---- running an operation ----------------------------------------------

    def run(self, op: Callable[[], T], replay: Sequence[DistributedState]) -> T:
        """op() with recovery: dead ranges are re-placed first; when a worker refuses
        (it does not hold the prefix), the sessions in `replay` are replayed and op
        runs once more. A worker lost meanwhile ends it with WorkerLostError."""
        with self._lock:
            self._revive()
            self._flush_freed()
            try:
                return op()
            except StageRefusedError:
                for state in replay:
                    self.replay(state)
            try:
                return op()
            except StageRefusedError as again:
                raise Ds4Error(
                    f"the layer workers refuse the session after a replay: {again}"
                ) from None

    def get(self, k: int, pending: Any) -> Any:
        try:
            return self.stages.get(k, pending)
        except StageLostError as lost:
            self._dead.add(k)
            raise WorkerLostError(
                f"the worker for layers {range_text(self.stages.ranges[k])} was lost "
                f"({lost.reason}); this request failed, the next one re-places the range and "
                "replays the session"
            ) from None

    def call_all(self, method: str, *args: Any) -> list[Any]:
        """method(*args) on every worker at once; their results in range order."""
        pending = [self.stages.submit(k, method, *args) for k in range(len(self.stages.ranges))]
        return [self.get(k, p) for k, p in enumerate(pending)]

    def _revive(self) -> None:
        for k in sorted(self._dead):
            try:
                self.stages.replace(k)
            except Ds4Error as exc:
                raise WorkerLostError(
                    f"cannot re-place the worker for layers {range_text(self.stages.ranges[k])}: "
                    f"{exc}"
                ) from None
            self._dead.discard(k)

    def _flush_freed(self) -> None:
        sids = []
        while self._freed:
            sids.append(self._freed.popleft())
        if not sids:
            return
        for k in range(len(self.stages.ranges)):
            self.stages.submit(k, "free", sids)  # fire and forget: nothing waits on it

    # ---- passes through the chain ------------------------------------------

    def _submit(self, items: list[WorkItem], streams: F32, want: bool, info: PassInfo) -> _Pass:
        packed = encode(streams, self.bits)
        x: Any = packed
        reports = []
        submitted = time.time()
        for k in range(len(self.stages.ranges)):
            out, report = self.stages.submit(k, "forward", items, x, num_returns=2)
            x = self.get(k, out) if self.options.transport == "values" else out
            reports.append(report)
        # into every range, and back out of the last one when the output is wanted
        self.bytes_sent += packed.nbytes * (len(self.stages.ranges) + int(want))
        return _Pass(x, reports, want, info, int(streams.shape[0]), packed.nbytes, submitted)

    def _finish(self, p: _Pass, expected: list[int]) -> F32 | None:
        """Wait for a pass; its output streams if wanted. Every range must report the
        hashes the coordinator expects after the pass."""
        got: list[StageReport] = []
        for k, pending in enumerate(p.reports):
            report = self.get(k, pending)
            got.append(report)
            if report.hashes != expected:
                raise StageRefusedError(
                    f"layers {range_text(self.stages.ranges[k])} report prefix hashes "
                    f"{report.hashes}, expected {expected}"
                )
        out: F32 | None = None
        fetch_from = time.time()
        if p.want:
            last = len(self.stages.ranges) - 1
            packed = p.final if self.options.transport == "values" else self.get(last, p.final)
            assert isinstance(packed, PackedRows)
            out = decode(packed)
        done = time.time()
        self.passes += 1
        if self.observers:
            self._observe(p, got, fetch_from, done)
        return out

    def _observe(self, p: _Pass, got: list[StageReport], fetch_from: float, done: float) -> None:
        starts = [r.started for r in got]
        ends = [r.ended for r in got]
        gaps = hop_gaps(p.submitted, starts, ends, [r.idle_since for r in got])
        info = p.info
        records = [
            HopRecord(
                self.passes, info.op, info.piece, info.pos, p.tokens, k,
                f"layers {range_text(self.stages.ranges[k])}", r.eval_s,
                max(0.0, done - r.ended), gaps[k], r.bytes_in, r.bytes_out,
            )
            for k, r in enumerate(got)
        ]  # fmt: skip
        if p.want:  # the way back: from the last range's end (or the fetch) to here
            back = max(0.0, done - max(ends[-1], fetch_from))
            records.append(
                HopRecord(
                    self.passes, info.op, info.piece, info.pos, p.tokens, len(got),
                    "coordinator", 0.0, max(0.0, done - p.submitted), back,
                    got[-1].bytes_out, 0,
                )
            )  # fmt: skip
        for record in records:
            for observe in self.observers:
                observe(record)

    def _embed(self, ids: I64) -> F32:
        streams = np.empty((ids.size, self.hp.n_hc, self.hp.n_embd), dtype=np.float32)
        self.head.embed(ids, streams)
        return streams

    def stream_pieces(
        self,
        state: DistributedState,
        pos: int,
        ids: I64,
        *,
        want: Literal["last", "all", "none"],
        reset: bool = False,
        op: str = "prefill",
    ) -> list[F32]:
        """Evaluate ids at positions pos.. of the session in pipelined pieces (the
        workers hold its first pos tokens, or nothing with reset); the final streams of
        the last piece ("last"), of every piece ("all"), or none. The coordinator's
        bookkeeping is the caller's."""
        size = self.options.piece
        hashes = rolling_hashes(state.hash_at(pos), ids.tolist())
        flight: deque[tuple[_Pass, list[int]]] = deque()
        out: list[F32] = []

        def finish_one() -> None:
            p, expected = flight.popleft()
            streams = self._finish(p, expected)
            if streams is not None:
                out.append(streams)

        starts = range(0, int(ids.size), size)
        for i, begin in enumerate(starts):
            piece = ids[begin : begin + size]
            prefix = state.hash_at(pos) if begin == 0 else hashes[begin - 1]
            item = state.work_item(pos + begin, prefix, piece, reset=reset and begin == 0)
            keep = want == "all" or (want == "last" and i == len(starts) - 1)
            expected = [hashes[begin + piece.size - 1]]
            info = PassInfo(op, i, pos + begin)
            flight.append((self._submit([item], self._embed(piece), keep, info), expected))
            if len(flight) >= self.window:
                finish_one()
        while flight:
            finish_one()
        return out

    def forward_batch(self, states: Sequence[DistributedState], ids: Sequence[I64]) -> F32:
        """One pass for several sessions (distinct, each with tokens) after their
        current tokens; the final streams of every row."""
        items, expected = [], []
        for s, t in zip(states, ids, strict=True):
            n = s.length
            items.append(s.work_item(n, s.hash_at(n), t))
            expected.append(extend_hash(s.hash_at(n), t.tolist()))
        streams = self._embed(np.concatenate(list(ids)))
        info = PassInfo("batch", 0, states[0].length if states else 0)
        out = self._finish(self._submit(items, streams, True, info), expected)
        assert out is not None
        return out

    # ---- replay ------------------------------------------------------------

    def replay(self, state: DistributedState) -> None:
        """Rebuild the session on every worker from what the coordinator keeps: the
        snapshot it was restored from (if any), then its tokens through the chain."""
        self.replays += 1
        self.rebuild(state)

    def rebuild(self, state: DistributedState) -> None:
        base, start = state.base, 0
        if base is not None:
            start = base[0]
            parts = self.split_layers(base[1])
            pending = [
                self.stages.submit(k, "restore", state.sid, state.ctx, start,
                                   state.hash_at(start), parts[k])
                for k in range(len(parts))
            ]  # fmt: skip
            for k, p in enumerate(pending):
                self.get(k, p)
        ids = state.token_array(start)
        if ids.size:
            self.stream_pieces(state, start, ids, want="none", reset=base is None, op="replay")
        elif base is None:
            self.call_all("free", [state.sid])

    def split_layers(self, layers: Sequence[LayerSnapshot]) -> list[list[LayerSnapshot]]:
        return [list(layers[r.start : r.stop]) for r in self.stages.ranges]


# --- DistributedState -----------------------------------------------------------------
# DistributedState: the SequenceState port over layer ranges held by workers.
#
# The workers hold the per-layer arrays; the coordinator keeps what it needs to check
# and rebuild them: the tokens, the rolling prefix hash after each position, the
# snapshot a payload restore started from, and the history trim not yet sent. EngineSession
# sits on top unchanged (docs/adr/0032), so payloads, checkpoints and rewinds behave as
# on a local backend. Truncate and trim only change the bookkeeping: the next operation
# names the prefix it expects, and each worker cuts its state back to it (or refuses,
# and the session is replayed).

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

        kind = "decode" if ids.size == 1 else "prefill"

        def op() -> list[F32]:
            return pipe.stream_pieces(
                self, self.length, ids, want="all" if every else "last", op=kind
            )

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
