"""RayRunner: the ModelRunner port with the model's layers split by range across Ray
workers (docs/distributed.md). The coordinator keeps the embedding and the output head;
each worker opens the same GGUF and holds one range; sessions are the domain's
StateSession over DistributedState, so everything above the runner is unchanged."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute import cpu_kernels
from ds4.adapters.compute.cpu.native_forward import NativeForward
from ds4.adapters.compute.ray.cluster import Slot, connect, slots
from ds4.adapters.compute.ray.pipeline import Pipeline, PipelineOptions, Stages, Transport
from ds4.adapters.compute.ray.stage import StageSpec
from ds4.adapters.compute.ray.state import DistributedState
from ds4.adapters.gguf.model_files import TensorValues, routed_quant_bits
from ds4.adapters.quant.native_codec import NativeDequantizer
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
    log: Callable[[str], None] | None = None,
    make_stages: Callable[[list[StageSpec], list[str | None]], Stages] | None = None,
) -> RayRunner:
    """The model split by layer ranges over Ray workers (`target`: local:N or ray://).

    numerics/impl as for the cpu backend (every worker runs the same kernels; exact
    numerics use the scalar ones). threads: kernel threads of the coordinator, and with
    local:N each worker gets an equal share (on a cluster each worker uses its own
    machine's cores). piece: tokens per pipelined prefill piece. transport: `refs`
    (ranges hand their output on as Ray object refs) or `values` (the coordinator
    fetches each range's output). log: one line per placed range. make_stages: how the
    workers are started (default: Ray actors; tests pass in-process ones).
    """
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
    ranges = plan_split(model, hparams, layer_split, places)
    if target.address is None and len(ranges) != target.local_workers:
        raise Ds4Error(
            f"--layer-split names {len(ranges)} ranges but {target} starts "
            f"{target.local_workers} workers"
        )
    worker_threads = 0 if target.address is not None else max(1, n_threads // len(ranges))
    tag = model_tag_for(hparams, model.metadata, model.tensors.values())
    path = str(Path(model.path).resolve())
    specs = [StageSpec(path, r, chosen.name, impl, worker_threads, tag) for r in ranges]
    nodes = [places[k % len(places)].node for k in range(len(ranges))]
    if target.address is not None:
        check_memory(model, hparams, ranges, [places[k % len(places)] for k in range(len(ranges))])
    if make_stages is None:
        from ds4.adapters.compute.ray.ray_stages import RayStages

        stages: Stages = RayStages(specs, nodes)
    else:
        stages = make_stages(specs, nodes)
    head = coordinator_forward(model, hparams, chosen, impl)
    pipeline = Pipeline(hparams, stages, head, PipelineOptions(piece, 0, transport))
    runner = RayRunner(model, hparams, pipeline)
    if log is not None:
        for line in runner.describe():
            log(line)
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
