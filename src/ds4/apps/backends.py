"""The compute backends `--backend` chooses from: one spec per backend, in BACKENDS.

Adding a backend is adding a spec here (the where-to-add section of
docs/ARCHITECTURE.md): the flag's choices and help, the backend checks, the runner,
the MTP drafter, the expert-cache counters and the device step report are all read
from its spec, and no other code compares backend names (tests/unit/apps/
test_backends.py scans src/ds4 for such comparisons). Part of the composition root
with wiring.py and bootstrap.py: each spec's factories import its adapters lazily, so
a command loads only the backend it runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace

from ds4.apps import wiring
from ds4.apps.options import EngineOptions
from ds4.domain.dist_transport import HopRecord
from ds4.domain.engine_math.lowprec import numerics_named
from ds4.domain.errors import Ds4Error
from ds4.domain.expert_cache import ExpertCacheStats, cache_slots
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.memory import (
    MemoryPlan,
    PlanInputs,
    choose_streaming,
    expert_slot_bytes,
    kv_bytes,
    routed_expert_bytes,
)
from ds4.domain.memory import memory_plan as plan_memory
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import ModelRunner
from ds4.ports.drafter import DraftModel
from ds4.ports.tokenizer import Tokenizer

Log = Callable[[str], None]
RunnerFactory = Callable[
    [wiring.OpenedModel | None, EngineOptions, Tokenizer | None, Log | None], ModelRunner
]
DrafterFactory = Callable[[str, ModelRunner, DeepSeekV4HParams], DraftModel]
HopObserver = Callable[[HopRecord], None]
ExpertCacheReader = Callable[[ModelRunner], Callable[[], ExpertCacheStats] | None]
StepReporter = Callable[[ModelRunner], str | None]
# the memory plan at start (domain/memory.py) over a model, its options, ctx and sessions
MemoryPlanner = Callable[[wiring.OpenedModel, EngineOptions, int, int], MemoryPlan]

ALL_NUMERICS = ("ds4", "exact", "fp32")


@dataclass(frozen=True)
class BackendSpec:
    """Everything ds4 knows about one backend. No field has a default: a new spec
    names every piece (tests/unit/apps/test_backends.py)."""

    name: str  # the --backend value
    help: str  # its clause in --backend's help
    title: str  # how an error names it ("the native CPU backend")
    numerics: tuple[str, ...]  # the --numerics it runs
    # a test double answering from --script outputs with no model: offered only by the
    # commands that declare it, and it takes --script / --script-token-delay
    plays_script: bool
    ssd_streaming: bool  # --ssd-streaming runs on it
    package: str  # the adapter package its runners come from (backend_of)
    unavailable: Callable[[], str | None]  # None where it runs here, else why not
    runner: RunnerFactory
    distributed: RunnerFactory | None  # its layers on Ray workers (None: no --distributed)
    drafter: DrafterFactory | None  # the MTP draft model over its runner (None: no --mtp)
    expert_cache: ExpertCacheReader  # the SSD-streaming cache's counters, or None
    step_report: StepReporter  # what the last device step cost, or None
    memory_plan: MemoryPlanner | None  # the plan said at start (None: none counted)


# ---- cpu: the native kernels on the mapped weights -----------------------------------


def _cpu_unavailable() -> str | None:
    try:
        from ds4.adapters.compute import cpu_kernels  # noqa: F401
    except ImportError:
        return "the native CPU kernels (ds4._native_cpu) are not in this build"
    return None


def _cpu_runner(
    model: wiring.OpenedModel | None, options: EngineOptions, _: Tokenizer | None, __: Log | None
) -> ModelRunner:
    from ds4.adapters.compute.cpu import cpu_runner

    opened = _needs_model(model, options)
    return cpu_runner(
        opened.file,
        opened.hparams,
        numerics=options.numerics,
        threads=options.threads,
        streaming=options.streaming,
        repack_experts=options.repack_experts,
    )


def _cpu_memory_plan(
    model: wiring.OpenedModel, options: EngineOptions, ctx: int, sessions: int
) -> MemoryPlan:
    """The cpu backend's memory plan (domain/memory.py) for this model, its
    --ssd-streaming budget and --repack-experts, against the room the system allows."""
    from ds4.adapters.compute import cpu_kernels
    from ds4.adapters.compute.cpu.expert_repack import repack_skip_reason
    from ds4.adapters.compute.cpu.expert_streaming import KV_AND_SCRATCH_RESERVE

    hp, infos = model.hparams, model.file.tensors
    sizes = {name: info.nbytes for name, info in infos.items()}
    room, source = wiring.memory_room().limits().room()
    routed = routed_expert_bytes(sizes, hp.n_layer)
    slot = expert_slot_bytes(sizes, hp.n_layer, hp.n_expert)
    auto = options.streaming is not None and options.streaming.auto
    if auto and options.streaming is not None and options.streaming.simulate_used_bytes:
        room = max(0, room - options.streaming.simulate_used_bytes)
        source += " less --simulate-used-memory"
    budget = None
    if options.streaming is not None and not auto:
        slots = cache_slots(
            options.streaming.cache,
            expert_bytes=slot,
            total_experts=hp.n_layer * hp.n_expert,
            available=room - options.streaming.simulate_used_bytes,
            resident=sum(sizes.values()) - routed,
            kv_and_scratch=KV_AND_SCRATCH_RESERVE,
        ).slots
        budget = slots * slot
    repack: list[int] = []
    skip = repack_skip_reason(
        options.repack_experts,
        numerics=options.numerics,
        impl="auto",
        streaming=options.streaming is not None and not auto,
    )
    if skip is None:  # the rule of expert_repack.repackable, on the tensor directory
        q8k = {int(t) for t in cpu_kernels.Q8K_TYPES}
        for il in range(hp.n_layer):
            down = infos.get(f"blk.{il}.ffn_down_exps.weight")
            gate = infos.get(f"blk.{il}.ffn_gate_exps.weight")
            up = infos.get(f"blk.{il}.ffn_up_exps.weight")
            if down is None or gate is None or up is None:
                continue
            if down.ggml_type == GGMLType.Q2_K and {int(gate.ggml_type), int(up.ggml_type)} <= q8k:
                repack.append(down.nbytes)
    inputs = PlanInputs(
        weights=sum(sizes.values()),
        routed=routed,
        expert_budget=budget,
        kv_per_session=kv_bytes(hp, ctx) if ctx > 0 else 0,
        ctx=max(ctx, 0),
        sessions=sessions,
        repack=sum(repack),
        repack_largest=max(repack, default=0),
        room=room,
        room_source=source,
    )
    if not auto:
        return plan_memory(inputs)
    choice = choose_streaming(inputs, slot, hp.n_layer * hp.n_expert)
    if choice is None:  # neither fits: the plain plan's refusal
        return plan_memory(inputs)
    if choice.stream:  # streamed experts are never repacked
        asked = options.streaming.cache if options.streaming is not None else None
        if asked is not None:  # --ssd-streaming-cache-experts: that budget, not the room's
            slots = cache_slots(
                asked, expert_bytes=slot, total_experts=hp.n_layer * hp.n_expert,
                available=room, resident=0, kv_and_scratch=0,
            ).slots  # fmt: skip
            choice = replace(choice, budget=slots * slot)
        inputs = replace(inputs, expert_budget=choice.budget, repack=0, repack_largest=0)
    return replace(plan_memory(inputs), streaming=choice)


def _ray_runner(
    model: wiring.OpenedModel | None, options: EngineOptions, _: Tokenizer | None, log: Log | None
) -> ModelRunner:
    from ds4.adapters.compute.ray import ray_runner

    spread = options.distributed
    assert spread is not None and model is not None  # model_runner checked both
    return ray_runner(
        model.file,
        model.hparams,
        target=spread.target,
        layer_split=spread.layer_split,
        numerics=options.numerics,
        threads=options.threads,
        piece=spread.piece,
        transport="values" if spread.transport == "values" else "refs",
        activation_bits=spread.activation_bits,
        log=log,
        trace=_trace_to_stderr if spread.trace else None,
    )


RAY_PACKAGE = "ds4.adapters.compute.ray"


def _trace_to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _cpu_drafter(path: str, runner: ModelRunner, main: DeepSeekV4HParams) -> DraftModel:
    from ds4.adapters.compute.cpu import CpuRunner
    from ds4.adapters.compute.cpu.mtp import CpuDraftModel
    from ds4.adapters.gguf.model_files import load_mtp

    assert isinstance(runner, CpuRunner)
    file, hp = load_mtp(path, main)
    return CpuDraftModel(runner.forward, file, hp)


def _cpu_expert_cache(runner: ModelRunner) -> Callable[[], ExpertCacheStats] | None:
    from ds4.adapters.compute.cpu import CpuRunner

    if not isinstance(runner, CpuRunner) or runner.streaming is None:
        return None
    return runner.streaming.stats


# ---- reference: the numpy engine (and vulkan, built on its session machinery) --------


def _reference_runner(
    model: wiring.OpenedModel | None, options: EngineOptions, _: Tokenizer | None, __: Log | None
) -> ModelRunner:
    from ds4.adapters.compute.reference import reference_runner

    opened = _needs_model(model, options)
    return reference_runner(
        opened.file,
        opened.hparams,
        numerics=options.numerics,
        dequantizer=wiring.dequantizer("native"),
    )


def _reference_drafter(path: str, runner: ModelRunner, main: DeepSeekV4HParams) -> DraftModel:
    """Also the vulkan runner's: it is a ReferenceRunner over device-resident states."""
    from ds4.adapters.compute.reference.mtp import ReferenceDraftModel
    from ds4.adapters.compute.reference.runner import ReferenceRunner
    from ds4.adapters.gguf.model_files import load_mtp

    assert isinstance(runner, ReferenceRunner)
    file, hp = load_mtp(path, main)
    return ReferenceDraftModel(runner.forward, file, hp, runner.numerics, wiring.dequantizer())


# ---- vulkan: the whole forward and the KV state on a Vulkan GPU ----------------------


def _vulkan_unavailable() -> str | None:
    from ds4.adapters.compute.vulkan.runtime import unavailable_reason

    return unavailable_reason()


def _vulkan_runner(
    model: wiring.OpenedModel | None, options: EngineOptions, _: Tokenizer | None, __: Log | None
) -> ModelRunner:
    from ds4.adapters.compute.vulkan.runner import vulkan_runner

    opened = _needs_model(model, options)
    return vulkan_runner(opened.file, opened.hparams, numerics=options.numerics)


def _vulkan_step_report(runner: ModelRunner) -> str | None:
    from ds4.adapters.compute.vulkan.runner import VulkanRunner

    if not isinstance(runner, VulkanRunner):
        return None  # the host-forward ReferenceRunner vulkan_runner can also return
    last = runner.device_forward.last
    detours = ", ".join(f"{k} x{v}" for k, v in last.fallbacks.items()) or "none"
    return (f"vulkan: last step ({last.tokens} tokens): {last.submissions} submission(s), "
            f"host fallbacks: {detours}")  # fmt: skip


# ---- scripted: the test double that plays back --script outputs ---------------------


def _scripted_runner(
    _: wiring.OpenedModel | None,
    options: EngineOptions,
    tokenizer: Tokenizer | None,
    __: Log | None,
) -> ModelRunner:
    from ds4.adapters.compute.scripted import ScriptedRunner, load_script

    if options.script is None or tokenizer is None:
        raise Ds4Error(f"--backend {options.backend} needs --script FILE")
    return ScriptedRunner(
        load_script(options.script), tokenizer, token_delay=options.script_token_delay
    )


# ---- pieces several backends share ---------------------------------------------------


def _always_available() -> str | None:
    return None


def _no_expert_cache(_: ModelRunner) -> Callable[[], ExpertCacheStats] | None:
    return None


def _no_step_report(_: ModelRunner) -> str | None:
    return None


def _needs_model(model: wiring.OpenedModel | None, options: EngineOptions) -> wiring.OpenedModel:
    """The model a backend computes over; refuses --ssd-streaming where it does not run."""
    if model is None:
        raise Ds4Error(f"the {options.backend} backend needs a model (-m)")
    if options.streaming is not None and not BACKENDS[options.backend].ssd_streaming:
        raise Ds4Error(f"--ssd-streaming needs --backend {names_where(lambda s: s.ssd_streaming)}")
    return model


BACKENDS: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec(
            name="cpu",
            help="native kernels on the mapped weights",
            title="the native CPU backend",
            numerics=ALL_NUMERICS,
            plays_script=False,
            ssd_streaming=True,
            package="ds4.adapters.compute.cpu",
            unavailable=_cpu_unavailable,
            runner=_cpu_runner,
            distributed=_ray_runner,
            drafter=_cpu_drafter,
            expert_cache=_cpu_expert_cache,
            step_report=_no_step_report,
            memory_plan=_cpu_memory_plan,
        ),
        BackendSpec(
            name="reference",
            help="the numpy engine checked against HF transformers",
            title="the numpy reference backend",
            numerics=("ds4", "fp32"),
            plays_script=False,
            ssd_streaming=False,
            package="ds4.adapters.compute.reference",
            unavailable=_always_available,
            runner=_reference_runner,
            distributed=None,
            drafter=_reference_drafter,
            expert_cache=_no_expert_cache,
            step_report=_no_step_report,
            memory_plan=None,
        ),
        BackendSpec(
            name="vulkan",
            help="the whole forward and the KV state on a Vulkan GPU; docs/vulkan.md",
            title="the Vulkan backend",
            numerics=("ds4", "fp32"),
            plays_script=False,
            ssd_streaming=False,
            package="ds4.adapters.compute.vulkan",
            unavailable=_vulkan_unavailable,
            runner=_vulkan_runner,
            distributed=None,
            drafter=_reference_drafter,
            expert_cache=_no_expert_cache,
            step_report=_vulkan_step_report,
            memory_plan=None,
        ),
        BackendSpec(
            name="scripted",
            help="plays back --script outputs (for client tests)",
            title="the scripted test double",
            numerics=ALL_NUMERICS,
            plays_script=True,
            ssd_streaming=False,
            package="ds4.adapters.compute.scripted",
            unavailable=_always_available,
            runner=_scripted_runner,
            distributed=None,
            drafter=None,
            expert_cache=_no_expert_cache,
            step_report=_no_step_report,
            memory_plan=None,
        ),
    )
}


# ---- what the flags, wiring and apps read ------------------------------------------


def backend_choices(*, scripted: bool = False) -> list[str]:
    """--backend's choices; `scripted`: with the test doubles (commands that take --script)."""
    return [name for name, spec in BACKENDS.items() if scripted or not spec.plays_script]


def backend_help(*, scripted: bool = False) -> str:
    """--backend's help: each backend's clause, the test doubles last."""
    real = ", ".join(f"{s.name} ({s.help})" for s in BACKENDS.values() if not s.plays_script)
    doubles = [f"{s.name}, which {s.help}" for s in BACKENDS.values() if s.plays_script]
    tail = "".join(f", or {d}" for d in doubles) if scripted else ""
    return f"compute backend: {real}{tail}"


def spec_named(name: str) -> BackendSpec:
    """The spec of a --backend value; Ds4Error naming the usable ones otherwise."""
    spec = BACKENDS.get(name)
    if spec is None:
        have = ", ".join(n for n, s in BACKENDS.items() if s.unavailable() is None)
        raise Ds4Error(f"backend {name!r} is not available in this build (have: {have})")
    return spec


def default_backend() -> str:
    """The first backend in BACKENDS that runs here (cpu when the native kernels are
    built, else the numpy reference); never a test double."""
    for name, spec in BACKENDS.items():
        if not spec.plays_script and spec.unavailable() is None:
            return name
    raise Ds4Error("no compute backend runs in this build")  # reference always does


def cpu_backend_available() -> bool:
    """Whether the native CPU kernels (ds4._native_cpu) import in this build."""
    return _cpu_unavailable() is None


def needs_model(backend: str) -> bool:
    """Whether the backend computes over a model file (-m), or plays back a script."""
    return not spec_named(backend).plays_script


def check_backend(backend: str, numerics: str = "ds4") -> None:
    """Refuse an unusable `--backend`/`--numerics` before any file is opened."""
    spec = spec_named(backend)
    reason = spec.unavailable()
    if reason is not None:
        raise Ds4Error(f"--backend {backend}: {reason}")
    numerics_named(numerics)  # an unknown name: the one line that lists the known ones
    if numerics not in spec.numerics:
        runs_on = " or ".join(
            f"{s.title} (--backend {s.name})"
            for s in BACKENDS.values()
            if numerics in s.numerics and not s.plays_script
        )
        raise Ds4Error(f"--numerics {numerics} runs on {runs_on}")


def model_runner(
    model: wiring.OpenedModel | None,
    options: EngineOptions,
    *,
    tokenizer: Tokenizer | None = None,
    log: Log | None = None,
) -> ModelRunner:
    """The compute backend options.backend names over an opened model (or none, for a
    test double); `tokenizer`: the one a scripted backend encodes its outputs with.
    options.distributed: the layers split by range across Ray workers
    (docs/distributed.md); log gets one line per range."""
    check_backend(options.backend, options.numerics)
    spec = BACKENDS[options.backend]
    if options.distributed is not None:
        if options.streaming is not None:
            raise Ds4Error("--ssd-streaming and --distributed do not go together (yet)")
        if spec.distributed is None or model is None:
            needs = names_where(lambda s: s.distributed is not None)
            raise Ds4Error(f"--distributed needs the {needs} backend and a model (-m)")
        return spec.distributed(model, options, tokenizer, log)
    return spec.runner(model, options, tokenizer, log)


def memory_plan(
    model: wiring.OpenedModel, options: EngineOptions, *, ctx: int, sessions: int
) -> MemoryPlan | None:
    """The backend's memory plan for `model` (None: the backend counts none, or the
    layers run elsewhere with --distributed)."""
    planner = BACKENDS[options.backend].memory_plan
    if planner is None or options.distributed is not None:
        return None
    return planner(model, options, ctx, sessions)


def backend_of(runner: ModelRunner) -> BackendSpec | None:
    """The spec whose adapter package made `runner` (None: a runner from elsewhere, as
    tests' fakes and the Ray runner)."""
    module = type(runner).__module__
    for spec in BACKENDS.values():
        if module == spec.package or module.startswith(spec.package + "."):
            return spec
    return None


def draft_model(path: str, runner: ModelRunner, main: DeepSeekV4HParams) -> DraftModel:
    """The MTP block of `path` (`--mtp`) on the runner's backend (docs/mtp.md)."""
    spec = backend_of(runner)
    if spec is None or spec.drafter is None:
        raise Ds4Error("--mtp needs --backend cpu or reference")
    return spec.drafter(path, runner, main)


def expert_cache_stats(runner: ModelRunner) -> Callable[[], ExpertCacheStats] | None:
    """The SSD-streaming cache's counters of a runner with --ssd-streaming, else None
    (for ds4 bench and the server's /metrics)."""
    spec = backend_of(runner)
    return spec.expert_cache(runner) if spec is not None else None


def device_step_report(runner: ModelRunner) -> str | None:
    """What the runner's last device step cost (the vulkan backend: submissions, host
    fallbacks), else None (ds4 bench prints it)."""
    spec = backend_of(runner)
    return spec.step_report(runner) if spec is not None else None


def hop_feed(runner: ModelRunner) -> Callable[[HopObserver], None] | None:
    """With --distributed: how to subscribe to every hop record of the runner's passes
    through its layer ranges (the server's /metrics, ds4 bench); None for other runners."""
    if not type(runner).__module__.startswith(RAY_PACKAGE + "."):
        return None  # not imported for other runners: it needs the native kernels
    from ds4.adapters.compute.ray import RayRunner

    if not isinstance(runner, RayRunner):
        return None
    return runner.pipeline.observers.append


def names_where(has: Callable[[BackendSpec], bool]) -> str:
    """The backends with a property, for a message ("cpu or reference")."""
    return " or ".join(s.name for s in BACKENDS.values() if has(s))
