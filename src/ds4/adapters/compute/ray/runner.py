"""RayRunner (the ModelRunner port) over layer ranges in Ray actors, and what talks to Ray:
joining or starting the cluster, and the actors the ranges run in (docs/distributed.md).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute import cpu_kernels
from ds4.adapters.compute.cpu.native_forward import NativeForward
from ds4.adapters.compute.ray.pipeline import (
    DistributedState,
    Pipeline,
    PipelineOptions,
    StageLostError,
    Stages,
    Transport,
)
from ds4.adapters.compute.ray.stage import LayerStage, StageRefusedError, StageSpec
from ds4.adapters.gguf.model_files import TensorValues, routed_quant_bits
from ds4.adapters.gguf.shard_set import ShardSet
from ds4.adapters.quant.native_codec import NativeDequantizer
from ds4.domain.dist_transport import (
    DEFAULT_ACTIVATION_BITS,
    bytes_per_token,
    check_bits,
    trace_line,
)
from ds4.domain.distributed import (
    DistributedTarget,
    auto_split,
    check_split,
    layer_bytes,
    parse_layer_split,
    range_text,
)
from ds4.domain.engine.state_runner import StateRunner
from ds4.domain.engine_math.lowprec import Numerics, check_numerics_fit, numerics_named
from ds4.domain.errors import Ds4Error
from ds4.domain.kvcache.kv_file import model_tag_for
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import SequenceState
from ds4.ports.model_file import ModelFile

# --- The runner -----------------------------------------------------------------------
# RayRunner: the ModelRunner port with the model's layers split by range across Ray
# workers (docs/distributed.md). The coordinator keeps the embedding and the output head;
# each worker opens the same GGUF, or its range's layer-shard file, and holds one range;
# sessions are the domain's EngineSession over DistributedState, so everything above the
# runner is unchanged.

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


class RayRunner(StateRunner):
    def __init__(self, model: ModelFile, hparams: DeepSeekV4HParams, pipeline: Pipeline) -> None:
        super().__init__(hparams)
        self._model = model
        self.pipeline = pipeline

    @property
    def routed_quant_bits(self) -> int:
        return routed_quant_bits(self._model)

    def new_state(self, ctx: int) -> SequenceState:
        return DistributedState(self.pipeline, ctx)

    @property
    def batches_in_one_pass(self) -> bool:
        return True  # one pass through the chain for every session's rows

    def forward_states(self, states: Sequence[SequenceState], ids: Sequence[I64]) -> list[F32]:
        mine = []
        for state in states:
            if not isinstance(state, DistributedState) or state.pipeline is not self.pipeline:
                raise Ds4Error("a distributed batch takes this runner's sessions only")
            mine.append(state)
        if len(mine) == 1:
            return [mine[0].forward(ids[0], False)]
        pipe = self.pipeline
        streams = pipe.run(lambda: pipe.forward_batch(mine, ids), mine)
        last_rows = np.cumsum([t.size for t in ids]) - 1
        logits = pipe.head.head(streams[last_rows])
        for state, t in zip(mine, ids, strict=True):
            state.commit(np.asarray(t, dtype=np.int64))
        return [logits[i : i + 1] for i in range(len(mine))]

    def describe(self) -> list[str]:
        """One line per range: where its worker runs."""
        stages = self.pipeline.stages
        return [stages.describe(k) for k in range(len(stages.ranges))]

    def close(self) -> None:
        close = getattr(self.pipeline.stages, "close", None)
        if close is not None:
            close()


def coordinator_forward(
    model: ModelFile, hparams: DeepSeekV4HParams, numerics: Numerics, impl: str
) -> NativeForward:
    """The coordinator's share of the model: the embedding table and the output head."""
    values = TensorValues(model, NativeDequantizer())
    code = cpu_kernels.IMPLS[impl]
    return NativeForward(hparams, model, values, numerics, code, layers=range(0), head=True)


def plan_split(
    model: ModelFile, hparams: DeepSeekV4HParams, layer_split: str, places: Sequence[Slot]
) -> list[range]:
    """The ranges for `--layer-split`: explicit ones as given, or `auto`: one range per
    slot, weight bytes in proportion to each slot's memory."""
    ranges = parse_layer_split(layer_split)
    if ranges is None:
        sizes = layer_bytes(((t.name, t.nbytes) for t in model.tensors.values()), hparams.n_layer)
        return auto_split(sizes, [s.memory for s in places])
    check_split(ranges, hparams.n_layer)
    return ranges


def shard_ranges(model: ShardSet, layer_split: str) -> list[range]:
    """The ranges of layer-shard files: theirs; an explicit --layer-split must agree."""
    ranges = [shard.layers for shard in model.shards]
    asked = parse_layer_split(layer_split)
    if asked is not None and asked != ranges:
        given = ",".join(range_text(r) for r in ranges)
        raise Ds4Error(
            f"--layer-split {layer_split} differs from the --layer-files' ranges ({given}): "
            "leave it auto"
        )
    return ranges


def ray_runner(
    model: ModelFile,
    hparams: DeepSeekV4HParams,
    *,
    target: DistributedTarget,
    layer_split: str = "auto",
    numerics: str = "ds4",
    threads: int | None = None,
    impl: str = "auto",
    piece: int = 256,
    transport: Transport = "refs",
    activation_bits: int = DEFAULT_ACTIVATION_BITS,
    log: Callable[[str], None] | None = None,
    trace: Callable[[str], None] | None = None,
    make_stages: Callable[[list[StageSpec], list[str | None]], Stages] | None = None,
) -> RayRunner:
    """The model split by layer ranges over Ray workers (`target`: local:N or ray://).

    numerics/impl as for the cpu backend (every worker runs the same kernels; exact
    numerics use the scalar ones). threads: kernel threads of the coordinator, and with
    local:N each worker gets an equal share (on a cluster each worker uses its own
    machine's cores). piece: tokens per pipelined prefill piece. transport: `refs`
    (ranges hand their output on as Ray object refs) or `values` (the coordinator
    fetches each range's output). activation_bits: 32, 16 or 8, how hidden states cross
    a range boundary (domain/dist_transport.py). log: one line per placed range. trace:
    one line per hop of every pass (--dist-trace). make_stages: how the workers are
    started (default: Ray actors; tests pass in-process ones).
    """
    check_bits(activation_bits)
    chosen = numerics_named(numerics)
    check_numerics_fit(chosen, hparams)
    if chosen.name == "exact":
        impl = "scalar"
    if impl not in cpu_kernels.available_impls():
        have = ", ".join(cpu_kernels.available_impls())
        raise Ds4Error(f"CPU kernel set {impl!r} is not available (have: {have})")
    n_threads = threads if threads is not None else os.cpu_count() or 1
    cpu_kernels.set_threads(n_threads)
    parse_layer_split(layer_split)  # a bad split fails before any cluster starts
    window_bytes = 8 * piece * hparams.n_hc * hparams.n_embd * 4
    if make_stages is None:
        connect(target, object_store_bytes=2 * window_bytes * max(target.local_workers, 1))
    places = slots(target)
    if isinstance(model, ShardSet):  # --layer-files: each range is its file's
        ranges = shard_ranges(model, layer_split)
        paths = [str(Path(p).resolve()) for p in model.paths]
    else:
        ranges = plan_split(model, hparams, layer_split, places)
        paths = [str(Path(model.path).resolve())] * len(ranges)
    if target.address is None and len(ranges) != target.local_workers:
        raise Ds4Error(
            f"--layer-split names {len(ranges)} ranges but {target} starts "
            f"{target.local_workers} workers"
        )
    worker_threads = 0 if target.address is not None else max(1, n_threads // len(ranges))
    if isinstance(model, ShardSet):
        tag = model.model_tag
    else:
        tag = model_tag_for(hparams, model.metadata, model.tensors.values())
    specs = [
        StageSpec(path, r, chosen.name, impl, worker_threads, tag, activation_bits)
        for path, r in zip(paths, ranges, strict=True)
    ]
    nodes = [places[k % len(places)].node for k in range(len(ranges))]
    if target.address is not None:
        check_memory(model, hparams, ranges, [places[k % len(places)] for k in range(len(ranges))])
    if make_stages is None:
        stages: Stages = RayStages(specs, nodes)
    else:
        stages = make_stages(specs, nodes)
    head = coordinator_forward(model, hparams, chosen, impl)
    options = PipelineOptions(piece, 0, transport, activation_bits)
    pipeline = Pipeline(hparams, stages, head, options)
    runner = RayRunner(model, hparams, pipeline)
    if trace is not None:
        pipeline.observers.append(lambda record: trace(trace_line(record)))
    if log is not None:
        for line in runner.describe():
            log(line)
        per_token = bytes_per_token(hparams.n_hc, hparams.n_embd, activation_bits)
        log(f"hidden states cross each boundary at {activation_bits} bits: {per_token} B per token")
    return runner


def check_memory(
    model: ModelFile, hparams: DeepSeekV4HParams, ranges: Sequence[range], places: Sequence[Slot]
) -> None:
    """A machine whose ranges' weights exceed its memory fails now, by name."""
    sizes = layer_bytes(((t.name, t.nbytes) for t in model.tensors.values()), hparams.n_layer)
    need: dict[str, int] = {}
    held: dict[str, list[str]] = {}
    for r, place in zip(ranges, places, strict=True):
        need[place.label] = need.get(place.label, 0) + sum(sizes[i] for i in r)
        held.setdefault(place.label, []).append(range_text(r))
    for place in places:
        if place.memory and need[place.label] > place.memory:
            raise Ds4Error(
                f"layers {', '.join(held[place.label])} need {_size(need[place.label])} of "
                f"weights but {place.label} offers {_size(place.memory)}; give it less with "
                "--layer-split"
            )


def _size(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


# --- The cluster ----------------------------------------------------------------------
# Joining or starting the Ray cluster the layer ranges run on, and where ranges go.
#
# `local:N` starts a Ray instance in this process's session with N logical worker slots
# and a small object store (only in-flight hidden states live there); `ray://HOST:PORT`
# connects to a running cluster through Ray Client. A process that already called
# ray.init (the tests, a notebook) keeps its cluster.

_MIN_OBJECT_STORE = 100 << 20  # Ray's floor is 75 MiB


@dataclass(frozen=True)
class Slot:
    node: str | None  # Ray node id to pin a range to (None: anywhere)
    memory: float  # bytes it offers (relative weights with local:N)
    label: str


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def connect(target: DistributedTarget, *, object_store_bytes: int) -> None:
    """ray.init for the target, unless this process is already connected."""
    if target.address is not None:
        _client_token_auth()  # before Ray is imported: it reads the mode once
    if not ray_available():
        raise Ds4Error(
            "--distributed needs Ray: pip install 'ds4[distributed]' (or ray) on the "
            "coordinator and every worker machine"
        )
    import ray

    # A pass that fails leaves the later pieces' results unread: the pipeline has
    # handled the failure, so Ray need not print each as an unhandled error.
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    if ray.is_initialized():
        return
    if target.address is not None:
        try:
            ray.init(address=target.address, logging_level=logging.WARNING, log_to_driver=False)
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ...
            raise Ds4Error(
                f"cannot join the Ray cluster at {target.address}: {exc} (a cluster with token "
                "authentication needs its token here: RAY_AUTH_TOKEN or ~/.ray/auth_token)"
            ) from None
        return
    _export_source_dir()
    ray.init(
        num_cpus=target.local_workers,
        object_store_memory=max(_MIN_OBJECT_STORE, object_store_bytes),
        include_dashboard=False,
        logging_level=logging.WARNING,
        log_to_driver=False,
    )


def _client_token_auth() -> None:
    """Ray Client sends the cluster's token only in token mode, which a plain ray.init
    turns on by itself when a token exists; do the same for ray:// (a cluster without
    authentication ignores the token)."""
    has_token = "RAY_AUTH_TOKEN" in os.environ or (Path.home() / ".ray" / "auth_token").exists()
    if has_token and "RAY_AUTH_MODE" not in os.environ:
        os.environ["RAY_AUTH_MODE"] = "token"


def _export_source_dir() -> None:
    """Local workers are new Python processes: let them import this very ds4 (a source
    checkout run with PYTHONPATH=src included) before the cluster starts them."""
    import ds4

    source = str(Path(ds4.__file__).resolve().parents[1])
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if source not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([source, *paths])


def slots(target: DistributedTarget) -> list[Slot]:
    """Where ranges can go: N equal local slots, or each alive node of the cluster with
    the memory Ray lets tasks use there."""
    if target.address is None:
        return [Slot(None, 1.0, f"local worker {k}") for k in range(target.local_workers)]
    import ray

    found = []
    for node in ray.nodes():  # type: ignore[no-untyped-call]
        if node.get("Alive"):
            memory = float(node.get("Resources", {}).get("memory", 0.0))
            found.append(Slot(str(node["NodeID"]), memory, str(node.get("NodeManagerAddress"))))
    if not found:
        raise Ds4Error(f"the Ray cluster at {target.address} has no live node")
    # several nodes on one machine share an address: tell them apart by their node id
    shared = {s.label for s in found if sum(o.label == s.label for o in found) > 1}
    found = [
        Slot(s.node, s.memory, f"{s.label} (node {str(s.node)[:8]})") if s.label in shared else s
        for s in found
    ]
    return sorted(found, key=lambda s: (s.label, s.node or ""))


# --- The workers as Ray actors --------------------------------------------------------
# The layer-range workers as Ray actors (the `Stages` of pipeline.py). Ray itself is
# imported only when a runner starts, never by importing this module.
#
# One actor per range runs a LayerStage; it is pinned to its node when the cluster has
# several (node affinity, not soft: a range never moves silently to a machine that
# lacks the model file). Ray's own restarts are off: a dead worker is reported to the
# pipeline, which fails the request and, on the next operation, asks for a new actor
# here. Results pass between actors as object refs, so a range's output goes to the
# next range without a stop at the coordinator when Ray keeps it in its object store.


@functools.cache
def _remote_stage() -> Any:
    """ray.remote(LayerStage), made once."""
    import ray

    return ray.remote(LayerStage)


class RayStages:
    def __init__(
        self,
        specs: Sequence[StageSpec],
        nodes: Sequence[str | None],
        *,
        start_timeout: float = 300.0,
        call_timeout: float | None = 900.0,
    ) -> None:
        """specs[k] is range k's worker, started on nodes[k] (None: wherever Ray likes).
        Every worker is started before any is waited for; Ds4Error names the first
        that cannot open its range."""
        import ray

        self._ray = ray
        self._specs = list(specs)
        self._nodes = list(nodes)
        self._start_timeout = start_timeout
        self._call_timeout = call_timeout
        self.info: list[dict[str, Any]] = [{} for _ in self._specs]
        self._actors: list[Any] = [self._launch(k) for k in range(len(self._specs))]
        try:
            for k in range(len(self._specs)):
                self._wait_ready(k)
        except BaseException:
            self.close()
            raise

    @property
    def ranges(self) -> Sequence[range]:
        return [s.layers for s in self._specs]

    def actor(self, k: int) -> Any:
        """Range k's actor handle (the tests kill it to inject a failure)."""
        return self._actors[k]

    # ---- starting ----------------------------------------------------------

    def _launch(self, k: int) -> Any:
        options: dict[str, Any] = {"num_cpus": 0, "max_restarts": 0, "max_concurrency": 1}
        node = self._nodes[k]
        if node is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        return _remote_stage().options(**options).remote(self._specs[k])

    def _wait_ready(self, k: int) -> None:
        where = f"layers {range_text(self._specs[k].layers)}"
        try:
            info = self._ray.get(self._actors[k].info.remote(), timeout=self._start_timeout)
        except self._ray.exceptions.GetTimeoutError:
            raise Ds4Error(
                f"the worker for {where} did not start within {self._start_timeout:.0f} s "
                "(`ray status` shows what the cluster is waiting for)"
            ) from None
        except self._ray.exceptions.RayError as exc:
            raise Ds4Error(f"the worker for {where} could not start: {_first_line(exc)}") from None
        if info.get("error"):
            raise Ds4Error(str(info["error"]))
        self.info[k] = info

    def replace(self, k: int) -> None:
        """A new worker for range k: on its node while that node lives, else wherever
        Ray can place it (every node has the model at the same path)."""
        self._kill(k)
        node = self._nodes[k]
        if node is not None and not self._node_alive(node):
            self._nodes[k] = None
        self._actors[k] = self._launch(k)
        self._wait_ready(k)

    def _node_alive(self, node: str) -> bool:
        try:
            nodes = self._ray.nodes()  # type: ignore[no-untyped-call]
        except Exception:  # the cluster cannot say: try the node we had
            return True
        return any(n.get("NodeID") == node and n.get("Alive") for n in nodes)

    def close(self) -> None:
        for k in range(len(self._actors)):
            self._kill(k)

    def _kill(self, k: int) -> None:
        # already gone, or the cluster is: nothing left to stop
        with contextlib.suppress(Exception):
            self._ray.kill(self._actors[k], no_restart=True)

    # ---- calls -------------------------------------------------------------

    def submit(self, k: int, method: str, *args: Any, num_returns: int = 1) -> Any:
        call = getattr(self._actors[k], method)
        if num_returns != 1:
            call = call.options(num_returns=num_returns)
        return call.remote(*args)

    def get(self, k: int, pending: Any) -> Any:
        ray = self._ray
        try:
            return ray.get(pending, timeout=self._call_timeout)
        except StageRefusedError as refused:  # Ray re-raises it as a subclass of the original
            raise StageRefusedError(str(refused.args[0]) if refused.args else "refused") from None
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, ray.exceptions.RayActorError):
                raise StageLostError(k, "an input came from a lost worker") from None
            if isinstance(cause, Ds4Error):
                raise Ds4Error(f"layers {range_text(self._specs[k].layers)}: {cause}") from None
            raise Ds4Error(
                f"the worker for layers {range_text(self._specs[k].layers)} failed: "
                f"{type(cause).__name__}: {cause}"
            ) from None
        except ray.exceptions.GetTimeoutError:
            raise StageLostError(k, f"no answer within {self._call_timeout:.0f} s") from None
        except ray.exceptions.RayError as exc:  # actor died, object lost, node gone
            raise StageLostError(k, _first_line(exc)) from None

    def describe(self, k: int) -> str:
        info = self.info[k]
        size = int(info.get("weight_bytes") or 0)
        weights = f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"
        node = self._nodes[k]
        pinned = f" (node {node[:8]})" if node is not None else ""
        return (
            f"layers {range_text(self._specs[k].layers)}: pid {info.get('pid')} on "
            f"{info.get('host')}{pinned}, {weights} of weights"
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
