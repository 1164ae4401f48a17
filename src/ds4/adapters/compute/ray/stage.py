"""LayerStage: one worker of a layer-split model, holding the state of its layer range
for every session the coordinator runs (docs/distributed.md).

The worker opens the GGUF itself (the same path on its node), or its range's layer-shard
file (`ds4 gguf split`), and lays out only its range's layers, so only those tensors are
ever read. It keeps, per session id, a C
sequence state of its layers (CpuState over a range NativeForward) and the rolling
prefix hash after each position it holds (domain/distributed.py).

Every operation names the prefix it applies to: (length, hash of those tokens). A
worker that holds that prefix, or a longer one it can cut back to exactly, goes on;
otherwise it refuses with StageRefusedError and changes nothing, and the coordinator
replays the session. So a restarted worker, or one holding another session's state,
is never computed on silently. Nothing here imports Ray: the actor wraps this class
(runner.py's RayStages), and tests drive it in-process.
"""

from __future__ import annotations

import os
import socket
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute import cpu_kernels
from ds4.adapters.compute.cpu.native_forward import NativeForward
from ds4.adapters.compute.cpu.sequence_state import CpuState
from ds4.adapters.gguf.model_files import TensorValues, load_model
from ds4.adapters.gguf.shard_set import file_model_tag
from ds4.adapters.quant.native_codec import NativeDequantizer
from ds4.domain.dist_transport import DEFAULT_ACTIVATION_BITS, PackedRows, decode, encode
from ds4.domain.distributed import EMPTY, layer_bytes, range_text, rolling_hashes
from ds4.domain.engine.dsv4_payload import LayerSnapshot, SessionSnapshot
from ds4.domain.engine_math.lowprec import numerics_named
from ds4.domain.errors import Ds4Error
from ds4.domain.model.shards import part_of


class StageRefusedError(Exception):
    """The worker does not hold the prefix an operation names (restarted, or another
    session's state): the coordinator replays the session. Nothing was changed."""


@dataclass(frozen=True)
class StageSpec:
    """What a worker needs to build its range; the coordinator sends the same to each."""

    path: str
    layers: range
    numerics: str
    impl: str  # kernel set (scalar under exact numerics)
    threads: int  # kernel threads in this worker (0: every core of its machine)
    model_tag: int  # the coordinator's model identity: a worker with another file refuses
    activation_bits: int = DEFAULT_ACTIVATION_BITS  # how this worker's output travels


@dataclass(frozen=True)
class WorkItem:
    """Tokens of one session for one pass: positions pos0.. continue the prefix whose
    hash is prefix_hash. reset: start the session afresh (pos0 must be 0)."""

    sid: int
    ctx: int
    pos0: int
    prefix_hash: int
    tokens: npt.NDArray[np.int32]
    trim_from: int = 0  # forget history before this position first (0: nothing)
    reset: bool = False


@dataclass(frozen=True)
class StageReport:
    """What a forward reports besides its output: each item's hash after its tokens,
    and its telemetry (wall-clock times of this worker's machine, seconds)."""

    hashes: list[int]
    started: float  # time.time() when the call began
    ended: float  # ... and when it returned its output
    idle_since: float  # when this worker's previous forward ended (0: none before)
    eval_s: float  # decode, layers and encode (a monotonic clock's duration)
    bytes_in: int  # hidden-state payload bytes received
    bytes_out: int  # ... and sent on


@dataclass
class _Held:
    state: CpuState
    base: int  # position of hashes[0]: 0, or where a restore put the state
    hashes: array[int]  # hashes[i]: hash of the first base + i tokens

    @property
    def length(self) -> int:
        return self.state.length

    def hash_at(self, n: int) -> int | None:
        i = n - self.base
        return self.hashes[i] if 0 <= i < len(self.hashes) else None


class LayerStage:
    def __init__(self, spec: StageSpec) -> None:
        self.spec = spec
        self.error: str | None = None
        self._held: dict[int, _Held] = {}
        self._weight_bytes = 0
        self._idle_since = 0.0
        where = f"layers {range_text(spec.layers)} on {socket.gethostname()}"
        try:
            self._fwd = self._open(spec)
        except Ds4Error as exc:  # reported by info(): a clean message, not a dead actor
            self.error = f"{where}: {exc}"
        except Exception as exc:
            self.error = f"{where}: {type(exc).__name__}: {exc}"

    def _open(self, spec: StageSpec) -> NativeForward:
        model, hp = load_model(spec.path, shard_ok=True)
        shard = part_of(model.metadata, model.tensors, hp.n_layer)
        if shard is not None and not (
            shard.layers.start <= spec.layers.start and spec.layers.stop <= shard.layers.stop
        ):
            model.close()
            raise Ds4Error(
                f"{spec.path} is the layer shard of layers {shard.label()}, it lacks layers "
                f"{range_text(spec.layers)}"
            )
        if file_model_tag(model, hp) != spec.model_tag:
            model.close()
            raise Ds4Error(f"{spec.path} is not the coordinator's model file")
        if spec.impl not in cpu_kernels.available_impls():
            raise Ds4Error(f"CPU kernel set {spec.impl!r} is not available on this machine")
        cpu_kernels.set_threads(spec.threads or os.cpu_count() or 1)
        values = TensorValues(model, NativeDequantizer())
        numerics = numerics_named(spec.numerics)
        sizes = layer_bytes(((t.name, t.nbytes) for t in model.tensors.values()), hp.n_layer)
        self._weight_bytes = sum(sizes[il] for il in spec.layers)
        return NativeForward(
            hp, model, values, numerics, cpu_kernels.IMPLS[spec.impl], layers=spec.layers,
            head=False,
        )  # fmt: skip

    # ---- introspection -----------------------------------------------------

    def info(self) -> dict[str, object]:
        """Where this worker runs, and the error that kept it from opening the model."""
        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "layers": range_text(self.spec.layers),
            "weight_bytes": self._weight_bytes,
            "error": self.error,
        }

    def sessions(self) -> dict[int, tuple[int, int]]:
        """(length, prefix hash) of every session held (diagnostics and tests)."""
        return {sid: (h.length, h.hashes[-1]) for sid, h in self._held.items()}

    # ---- the prefix check --------------------------------------------------

    def _refuse(self, sid: int, n: int, why: str) -> StageRefusedError:
        return StageRefusedError(
            f"layers {range_text(self.spec.layers)}: session {sid} at {n} tokens: {why}"
        )

    def _hold(self, sid: int, n: int, h: int, trim_from: int = 0) -> _Held | None:
        """The session's state cut back to the prefix (n, h), or StageRefusedError. None:
        the session is not held and (n, h) is the empty prefix."""
        if self.error is not None:
            raise Ds4Error(self.error)
        held = self._held.get(sid)
        if held is None:
            if n == 0 and h == EMPTY:
                return None
            raise self._refuse(sid, n, "not held here (the worker restarted or dropped it)")
        if held.hash_at(n) != h:
            raise self._refuse(sid, n, "worker KV prefix hash mismatch")
        if n < held.length:
            if not held.state.history_ok(n):
                raise self._refuse(sid, n, "the kept history does not reach back there")
            held.state.truncate(n)
            del held.hashes[n - held.base + 1 :]
        if trim_from > 0:
            held.state.trim(trim_from)
        return held

    def _new(self, sid: int, ctx: int) -> _Held:
        held = _Held(CpuState(self._fwd, ctx), 0, array("Q", [EMPTY]))
        self._held[sid] = held
        return held

    # ---- operations --------------------------------------------------------

    def forward(
        self, items: Sequence[WorkItem], streams: PackedRows
    ) -> tuple[PackedRows, StageReport]:
        """This range's layers over `streams` (the items' rows in order, packed as the
        previous hop sent them); returns the streams for the next range, packed at this
        worker's activation bits, and the report: each item's hash after its tokens and
        the call's telemetry. Every item is checked before anything runs; on any error
        no session changes."""
        started, clock = time.time(), time.perf_counter()
        held: list[_Held] = []
        for item in items:
            if item.reset:
                if item.pos0 != 0 or item.prefix_hash != EMPTY:
                    raise Ds4Error("a reset work item starts at position 0")
                self._held.pop(item.sid, None)
            current = self._hold(item.sid, item.pos0, item.prefix_hash, item.trim_from)
            if current is None:
                current = self._new(item.sid, item.ctx)
            if any(current is other for other in held):
                raise Ds4Error(f"session {item.sid} appears twice in one pass")
            held.append(current)
        out = decode(streams)  # a new writable array (Ray hands read-only views)
        ids = np.concatenate([item.tokens for item in items]).astype(np.int32)
        counts = [int(item.tokens.size) for item in items]
        self._fwd.run_rows([h.state.seq for h in held], counts, out, ids)
        results = []
        for item, h in zip(items, held, strict=True):
            h.hashes.extend(rolling_hashes(h.hashes[-1], item.tokens.tolist()))
            results.append(h.hashes[-1])
        packed = encode(out, self.spec.activation_bits)
        eval_s = time.perf_counter() - clock
        ended = time.time()
        report = StageReport(
            results, started, ended, self._idle_since, eval_s, streams.nbytes, packed.nbytes
        )
        self._idle_since = ended
        return packed, report

    def history_ok(self, sid: int, n: int, h: int, trim_from: int, ms: Sequence[int]) -> bytes:
        """For each m of ms, 1 if the kept history rebuilds the state after m positions."""
        held = self._hold(sid, n, h, trim_from)
        if held is None:
            return bytes(len(ms))
        return bytes(int(held.state.history_ok(m)) for m in ms)

    def snapshot(self, sid: int, n: int, h: int) -> list[LayerSnapshot]:
        """This range's layers of the session's DSV4 snapshot after its n tokens."""
        held = self._hold(sid, n, h)
        state = CpuState(self._fwd, 1) if held is None else held.state  # None: empty
        # the layers depend on positions only: placeholder tokens and logits
        return state.snapshot([0] * n, np.zeros(0, np.float32)).layers

    def restore(self, sid: int, ctx: int, n: int, h: int, layers: list[LayerSnapshot]) -> None:
        """Replace the session by this range's part of a snapshot after n tokens whose
        hash is h."""
        if self.error is not None:
            raise Ds4Error(self.error)
        state = CpuState(self._fwd, ctx)
        state.restore(SessionSnapshot([0] * n, np.zeros(0, np.float32), layers))
        self._held[sid] = _Held(state, n, array("Q", [h]))

    def clone(self, sid: int, n: int, h: int, new_sid: int) -> None:
        """A deep copy of the session (history included) under new_sid."""
        held = self._hold(sid, n, h)
        if held is None:
            self._held.pop(new_sid, None)
            return
        copy = held.state.clone()
        assert isinstance(copy, CpuState)
        self._held[new_sid] = _Held(copy, held.base, array("Q", held.hashes))

    def nbytes(self, sid: int) -> int:
        held = self._held.get(sid)
        return 0 if held is None else held.state.nbytes

    def free(self, sids: Sequence[int]) -> None:
        for sid in sids:
            self._held.pop(sid, None)
