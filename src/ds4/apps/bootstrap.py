"""The composition root of the engine, and of the apps built on it alone.

`load_engine` opens and validates the model GGUF once and shares that mapping: the
tokenizer is read from its metadata, the runner (the spec backends.BACKENDS names)
computes over its tensors and the KV model tag hashes its identity. `ds4 cli` and
`ds4 bench` use the engine alone; `bootstrap_agent` adds the agent's tools and saved
sessions; `bootstrap_eval` builds `ds4 eval`'s answerer; the server's graph is
server_bootstrap.py's. Each takes its options object (apps/options.py) whole.

With wiring.py (which adapter serves each port), backends.py and server_bootstrap.py
this is the only apps code that imports ds4.adapters; those imports are lazy, so
`ds4 cli` never loads the HTTP stack.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ds4.apps import backends, wiring
from ds4.apps.flag_types import model_file_problem
from ds4.apps.options import (
    MAX_MTP_DRAFT,
    AgentOptions,
    EngineOptions,
    EvalOptions,
    SteeringRequest,
)
from ds4.domain.agent.agent import Agent
from ds4.domain.agent.core import AgentCore
from ds4.domain.agent.library import SessionLibrary
from ds4.domain.agent.toolbox import ToolBox
from ds4.domain.engine.duty_cycle import DutyCycle
from ds4.domain.engine.session import EngineSession, StepPolicy
from ds4.domain.errors import Ds4Error
from ds4.domain.expert_cache import CacheSpec, StreamingOptions
from ds4.domain.kvcache.kv_file import model_tag_for
from ds4.domain.memory import StreamingChoice
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.speculative import MtpDrafter
from ds4.domain.steering.directions import Steering, directions_from_bytes, steering_scales
from ds4.ports.agent import AgentIO, Browser, Shell
from ds4.ports.compute import ComputeSession, ModelRunner, Steerable
from ds4.ports.drafter import Drafter, DraftModel
from ds4.ports.tokenizer import Tokenizer

if TYPE_CHECKING:
    from ds4.adapters.compute.batching import StepGate
    from ds4.adapters.eval.answerers import EngineAnswerer

Log = Callable[[str], None]

# ---- the engine: cli, bench and the server ---------------------------------------


@dataclass(frozen=True)
class Speculation:
    """--mtp: the MTP block and how many tokens it drafts per step (docs/mtp.md)."""

    model: DraftModel
    draft: int


@dataclass(frozen=True)
class Engine:
    tokenizer: Tokenizer
    runner: ModelRunner
    model: wiring.OpenedModel | None = None  # None: no model file (scripted, or fakes)
    speculation: Speculation | None = None
    duty: DutyCycle | None = None  # --power: every session's evaluations are paced

    def new_session(self, ctx: int, *, chunk: int = 0) -> EngineSession:
        """A live session; with --mtp its drafter too."""
        return self.session_over(self.runner.new_session(ctx), chunk=chunk)

    def session_over(
        self, compute: ComputeSession, *, chunk: int = 0, gate: StepGate | None = None
    ) -> EngineSession:
        """The live session over a compute session of this engine's runner: with --mtp
        its drafter, with --power paced, with a gate (--sessions N) batched."""
        drafter: Drafter | None = None
        if self.speculation is not None:
            if not (isinstance(compute, EngineSession) and compute.holds_state):
                raise Ds4Error("--mtp needs --backend cpu or reference")
            drafter = MtpDrafter(self.speculation.model, compute)
        policies: list[StepPolicy] = [] if self.duty is None else [self.duty]
        if gate is not None:
            policies.append(gate)
        draft = self.speculation.draft if self.speculation is not None else 0
        return EngineSession.over(
            compute, chunk=chunk, drafter=drafter, draft=draft, policies=policies
        )

    def model_tag(self) -> int:
        """The KVC header's model tag: the model file's identity (ADR 0006), or, with no
        file, the runner's hyperparameters alone."""
        if self.model is None:
            return model_tag_for(self.runner.hparams)
        file = self.model.file
        return model_tag_for(self.runner.hparams, file.metadata, file.tensors.values())


# ---- which model: cli, bench and the server ----------------------------------------

DS4FLASH = "ds4flash.gguf"


def shipped_demo_model() -> Path:
    """models/demo.gguf of the source tree the package runs from (a checkout, an editable
    install, PYTHONPATH=src). A wheel does not carry it (docs/demo-model.md)."""
    return Path(__file__).resolve().parents[3] / "models" / "demo.gguf"


def shipped_test_vectors() -> Path:
    """tests/test-vectors of the source tree: DeepSeek's official API vectors
    (docs/test-vectors.md); like the demo model, a wheel does not carry them."""
    return Path(__file__).resolve().parents[3] / "tests" / "test-vectors"


def default_model_path(explicit: str | None) -> str:
    """The one model-choice rule of `ds4 cli`, `ds4 bench` and `ds4 server`: -m, else
    $DS4_MODEL, else ./ds4flash.gguf, else the shipped demo model (models/demo.gguf).

    A model named by -m or $DS4_MODEL must exist: a typo is an error, never a fallback
    to another model. An empty $DS4_MODEL counts as unset.
    """
    for origin, path in (("-m", explicit), ("DS4_MODEL", os.environ.get("DS4_MODEL") or None)):
        if path is not None:
            if not Path(path).exists():  # anything else there gets the GGUF reader's error
                raise Ds4Error(
                    f"model file {path} (from {origin}) not found; without -m and DS4_MODEL "
                    f"the model is ./{DS4FLASH} or the shipped demo model (a random test "
                    "model: ds4 gguf tiny --out FILE)"
                )
            _refuse_non_model_file(origin, Path(path))
            return path
    for candidate in (Path(DS4FLASH), shipped_demo_model()):
        if candidate.exists():
            _refuse_non_model_file(str(candidate), candidate)
            return str(candidate)
    demo = shipped_demo_model()
    # An installed package has no models/ beside it: naming that path would only puzzle.
    looked = f"{demo}" if demo.parent.is_dir() else "no demo model: an installed ds4 has none"
    raise Ds4Error(
        f"no model: pass -m FILE or set DS4_MODEL (looked for ./{DS4FLASH}; {looked}; "
        "a random test model: ds4 gguf tiny --out FILE)"
    )


def _refuse_non_model_file(origin: str, path: Path) -> None:
    """A directory or FIFO there would otherwise hang or confuse the loader."""
    problem = model_file_problem(path)
    if problem is not None:
        raise Ds4Error(f"{origin}: {problem}")


def is_shipped_demo(path: str) -> bool:
    return Path(path).resolve() == shipped_demo_model()


def model_path(backend: str, explicit: str | None) -> str | None:
    """The model a command runs: default_model_path's choice, or, for a backend that
    plays back a script, -m as given (None: no model at all)."""
    return default_model_path(explicit) if backends.needs_model(backend) else explicit


def _stderr_line(line: str) -> None:
    print(f"ds4: {line}", file=sys.stderr)


def _distributed_line(line: str) -> None:
    print(f"ds4: distributed {line}", file=sys.stderr)


def load_engine(
    options: EngineOptions,
    *,
    log: Log | None = _distributed_line,
    ctx: int | None = None,
    plan_log: Log | None = _stderr_line,
) -> Engine:
    """Check the backend choice, open the model (if any) once, build tokenizer and
    runner over it. Without a model the tokenizer is the official tokenizer.json
    (the scripted backend's case). options.mtp: the MTP GGUF for speculative decoding;
    options.power: the duty cycle in percent (None: no pacing at all, as `ds4 bench`);
    options.steering: the --dir-steering-* flags; options.distributed: the layers on
    Ray workers (docs/distributed.md), where `log` gets where each range runs (default:
    `ds4: distributed ...` lines on stderr).
    ctx: the context the memory plan counts KV for (None: the options' own --ctx and
    --sessions where the command has them; docs/ssd-streaming.md#the-memory-plan);
    plan_log: where the plan's line goes (None: unsaid, for a command whose stderr is
    its own report; a model that does not fit is refused all the same)."""
    duty = DutyCycle(wiring.pacer(), options.power) if options.power is not None else None
    backends.check_backend(options.backend, options.numerics)
    shards = options.distributed.layer_files if options.distributed is not None else ()
    model = wiring.open_model(options.model, shards=shards) if options.model is not None else None
    if model is not None:
        tokenizer = wiring.tokenizer_from_model(model.file)
    else:
        tokenizer = wiring.tokenizer(None)
    if model is not None:
        options = _planned(model, options, ctx, plan_log)
    runner = backends.model_runner(model, options, tokenizer=tokenizer, log=log)
    if options.steering is not None and model is not None:
        apply_steering(runner, options.steering, model.hparams)
    speculation = None
    if options.mtp is not None:
        if model is None:
            raise Ds4Error("--mtp needs a model (-m) and --backend cpu or reference")
        if not 1 <= options.mtp_draft <= MAX_MTP_DRAFT:
            raise Ds4Error(f"--mtp-draft {options.mtp_draft}: use 1..{MAX_MTP_DRAFT}")
        draft = backends.draft_model(options.mtp, runner, model.hparams)
        speculation = Speculation(draft, options.mtp_draft)
    return Engine(tokenizer, runner, model, speculation, duty)


def _planned(
    model: wiring.OpenedModel, options: EngineOptions, ctx: int | None, say: Log | None
) -> EngineOptions:
    """Say the memory plan; refuse a model that does not fit, skip a repack that would
    not (the options returned then have --repack-experts off)."""
    counted = ctx if ctx is not None else getattr(options, "ctx", None)
    sessions = int(getattr(options, "sessions", 1))
    plan = backends.memory_plan(model, options, ctx=counted or 0, sessions=sessions)
    if plan is None:
        return options
    if plan.streaming is not None and options.streaming is not None:
        options = _resolved_streaming(options, options.streaming, plan.streaming)
        if say is not None:
            say(plan.streaming.line)
    if say is not None:
        say(plan.line)
    if plan.refusal is not None:
        raise Ds4Error(plan.refusal)
    if plan.skip_repack is not None:
        print(f"ds4: {plan.skip_repack}", file=sys.stderr)
        return replace(options, repack_experts="off")
    return options


def _resolved_streaming(
    options: EngineOptions, asked: StreamingOptions, choice: StreamingChoice
) -> EngineOptions:
    """The options after `--ssd-streaming auto` chose: no streaming, or streaming with
    the plan's expert cache budget (unless --ssd-streaming-cache-experts gave one)."""
    if not choice.stream:
        return replace(options, streaming=None)
    cache = asked.cache if asked.cache is not None else CacheSpec(bytes=choice.budget)
    return replace(options, streaming=replace(asked, auto=False, cache=cache))


def apply_steering(runner: ModelRunner, request: SteeringRequest, hp: DeepSeekV4HParams) -> None:
    """Turn directional steering on (docs/steering.md), or check there is nothing to do."""
    attn, ffn = steering_scales(request.file is not None, request.attn, request.ffn)
    if request.file is None or (attn == 0.0 and ffn == 0.0):
        return
    if not isinstance(runner, Steerable):
        raise Ds4Error("directional steering needs --backend cpu or reference")
    try:
        data = Path(request.file).read_bytes()
    except OSError as exc:
        raise Ds4Error(f"cannot read {request.file}: {exc.strerror}") from None
    directions = directions_from_bytes(data, request.file, hp.n_layer, hp.n_embd)
    runner.steer(Steering(directions, attn, ffn))
    print(f"ds4: directional steering enabled: {request.file} attn={attn:g} ffn={ffn:g}",
          file=sys.stderr)  # fmt: skip


# ---- ds4 eval ----------------------------------------------------------------------


def shipped_sample_suite() -> Path:
    """evals/sample.jsonl of the source tree, ds4 eval's cases when no --cases is given
    (like the demo model, a wheel does not carry it)."""
    return Path(__file__).resolve().parents[3] / "evals" / "sample.jsonl"


def bootstrap_eval(options: EvalOptions) -> EngineAnswerer:
    """ds4 eval's case answerer on the engine `options` names; its session opens once
    the context is sized (EngineAnswerer.open)."""
    from ds4.adapters.eval.answerers import EngineAnswerer

    engine = load_engine(options)
    return EngineAnswerer(
        engine.tokenizer, engine.runner, backend=options.backend, chunk=options.prefill_chunk
    )


# ---- the agent -------------------------------------------------------------------


@dataclass
class BuiltAgent:
    agent: Agent
    shell: Shell
    browser: Browser | None

    def close(self) -> None:
        """Kill running bash jobs, close the browser (call from the worker thread: the
        browser belongs to the thread that used it)."""
        self.shell.close()
        if self.browser is not None:
            self.browser.close()


def bootstrap_agent(
    options: AgentOptions, io: AgentIO, *, engine: Engine | None = None
) -> BuiltAgent:
    """The agent's object graph: the engine's session, its tools on the working
    directory, and (with options.home) the saved sessions: KV files in home/kv, their
    JSON records in home/sessions."""
    if engine is None:
        engine = load_engine(options)
    session = EngineSession.over(
        engine.runner.new_session(options.ctx), chunk=options.prefill_chunk
    )
    cwd = str(Path(options.cwd).resolve())
    shell = wiring.agent_shell(cwd)
    browser = wiring.agent_browser() if options.web else None
    tools = ToolBox(
        wiring.agent_workspace(cwd), shell, browser, edit_upto=options.settings.edit_upto
    )
    library = None
    if options.home is not None:
        library = SessionLibrary(
            wiring.kv_store(str(Path(options.home) / "kv"), io.trace),
            wiring.agent_session_index(str(Path(options.home) / "sessions")),
            model_tag=engine.model_tag(),
            quant_bits=engine.runner.routed_quant_bits,
            ctx=options.ctx,
        )
    core = AgentCore(session, engine.tokenizer, options.settings, tools, io, library)
    return BuiltAgent(Agent(core), shell, browser)
