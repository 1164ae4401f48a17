"""The coordinator's side of a layer-split model: pushes hidden streams through the
chain of layer-range workers, checks the session invariant, replays sessions a worker
no longer holds, and turns a lost worker into a clean error and a re-placed range
(docs/distributed.md).

The workers are reached through `Stages` (ray_stages.py puts them in Ray actors; the
tests also run them in-process). A pass submits one `forward` per range, each taking
the previous range's output; with the `refs` transport the whole chain is submitted
at once and Ray hands each output to the next worker as an object ref, so several
prefill pieces are in flight together (piece k+1 on range 1 while piece k is on range
2). The `values` transport fetches each range's output before calling the next.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.cpu.native_forward import NativeForward
from ds4.adapters.compute.ray.stage import StageRefusedError, WorkItem
from ds4.domain.distributed import extend_hash, range_text, rolling_hashes
from ds4.domain.engine.dsv4_payload import LayerSnapshot
from ds4.domain.errors import ComputeUnavailableError, Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams

if TYPE_CHECKING:
    from ds4.adapters.compute.ray.state import DistributedState

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
T = TypeVar("T")
Transport = Literal["refs", "values"]


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


@dataclass
class _Pass:
    final: Any  # the last range's output streams (pending, or a value with `values`)
    reports: list[Any]  # each range's result hashes (pending)
    want: bool  # keep the output streams (for logits)


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

    def _submit(self, items: list[WorkItem], streams: F32, want: bool) -> _Pass:
        x: Any = streams
        reports = []
        for k in range(len(self.stages.ranges)):
            out, report = self.stages.submit(k, "forward", items, x, num_returns=2)
            x = self.get(k, out) if self.options.transport == "values" else out
            reports.append(report)
        # into every range, and back out of the last one when the output is wanted
        self.bytes_sent += streams.nbytes * (len(self.stages.ranges) + int(want))
        return _Pass(x, reports, want)

    def _finish(self, p: _Pass, expected: list[int]) -> F32 | None:
        """Wait for a pass; its output streams if wanted. Every range must report the
        hashes the coordinator expects after the pass."""
        for k, report in enumerate(p.reports):
            got = self.get(k, report)
            if got != expected:
                raise StageRefusedError(
                    f"layers {range_text(self.stages.ranges[k])} report prefix hashes {got}, "
                    f"expected {expected}"
                )
        if not p.want:
            return None
        last = len(self.stages.ranges) - 1
        out = p.final if self.options.transport == "values" else self.get(last, p.final)
        return np.asarray(out, dtype=np.float32)

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
            flight.append((self._submit([item], self._embed(piece), keep), expected))
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
        out = self._finish(self._submit(items, streams, True), expected)
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
            self.stream_pieces(state, start, ids, want="none", reset=base is None)
        elif base is None:
            self.call_all("free", [state.sid])

    def split_layers(self, layers: Sequence[LayerSnapshot]) -> list[list[LayerSnapshot]]:
        return [list(layers[r.start : r.stop]) for r in self.stages.ranges]
