"""The composition roots: each app family's object graph, built in one place.

`load_engine` opens and validates the model GGUF once and shares that mapping: the
tokenizer is read from its metadata, the runner computes over its tensors and the KV
model tag hashes its identity. `ds4 cli` and `ds4 bench` use the engine alone;
`bootstrap_agent` adds the agent's tools and saved sessions;
`bootstrap_server` adds the worker (or, with `--sessions N`, N slots over one batching
step gate), the disk KV cache and the HTTP app. The server's
adapters can be passed in already built (the engine's runner and tokenizer, the KV
store, the clock, the random source): tests pass fakes and no file is opened.

With wiring.py (which adapter serves each port) this is the only apps code that
imports ds4.adapters; those imports are lazy, so `ds4 cli` never loads the HTTP stack.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ds4.apps import wiring
from ds4.apps.agent.options import AgentOptions
from ds4.apps.engine_flags import DEFAULT_MTP_DRAFT, MAX_MTP_DRAFT, SteeringRequest
from ds4.apps.flag_types import model_file_problem
from ds4.apps.server_options import MAX_SESSIONS, ServerOptions
from ds4.domain.agent.agent import Agent
from ds4.domain.agent.core import AgentCore
from ds4.domain.agent.library import SessionLibrary
from ds4.domain.agent.toolbox import ToolBox
from ds4.domain.chat import PrefixTurn, parse_prefix_file
from ds4.domain.distributed import DistributedOptions
from ds4.domain.engine.duty_cycle import DutyCycle
from ds4.domain.engine.session import EngineSession, StepPolicy
from ds4.domain.engine.state_session import StateSession
from ds4.domain.errors import Ds4Error
from ds4.domain.expert_cache import StreamingOptions
from ds4.domain.kvcache.disk_cache import DiskCache
from ds4.domain.kvcache.kv_file import model_tag_for
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.serving.checkpoints import KvCheckpoints, MemoryCheckpoints
from ds4.domain.serving.job import Worker
from ds4.domain.serving.live import EverySlotBindings
from ds4.domain.serving.prepare import longest_token_bytes
from ds4.domain.speculative import MtpDrafter
from ds4.domain.steering.directions import Steering, directions_from_bytes, steering_scales
from ds4.domain.tools import ToolReplayMemory
from ds4.ports.agent import AgentIO, Browser, Shell
from ds4.ports.compute import ComputeSession, ModelRunner
from ds4.ports.drafter import Drafter, DraftModel
from ds4.ports.kv_store import KVStore
from ds4.ports.steering import Steerable
from ds4.ports.system import Clock, RandomSource
from ds4.ports.tokenizer import Tokenizer

if TYPE_CHECKING:
    from ds4.adapters.compute.batching import StepGate
    from ds4.adapters.eval.engine_answerer import EngineAnswerer
    from ds4.adapters.http.guard import ASGIApp
    from ds4.adapters.http.inference_worker import JobQueue
    from ds4.adapters.http.server_state import ServerState

kv_log = logging.getLogger("ds4.kvcache")
server_log = logging.getLogger("ds4.server")
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
            if not isinstance(compute, StateSession):
                raise Ds4Error("--mtp needs --backend cpu or reference")
            drafter = MtpDrafter(self.speculation.model, compute)
        policies: list[StepPolicy] = [] if self.duty is None else [self.duty]
        if gate is not None:
            policies.append(gate)
        draft = self.speculation.draft if self.speculation is not None else 0
        return EngineSession(compute, chunk=chunk, drafter=drafter, draft=draft, policies=policies)

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


def load_engine(
    path: str | None,
    *,
    backend: str,
    numerics: str = "ds4",
    threads: int | None = None,
    script: str | None = None,
    script_token_delay: float = 0.0,
    streaming: StreamingOptions | None = None,
    repack_experts: str = "auto",
    mtp: str | None = None,
    mtp_draft: int = DEFAULT_MTP_DRAFT,
    power: int | None = None,
    steering: SteeringRequest | None = None,
    distributed: DistributedOptions | None = None,
    log: Log | None = None,
) -> Engine:
    """Check the backend choice, open the model (if any) once, build tokenizer and
    runner over it. Without a model the tokenizer is the official tokenizer.json
    (the scripted backend's case). `mtp`: the MTP GGUF for speculative decoding;
    `power`: the duty cycle in percent (None: no pacing at all, as `ds4 bench`);
    `steering`: the --dir-steering-* flags; distributed: the layers on Ray workers
    (docs/distributed.md); log gets where each range runs."""
    duty = DutyCycle(wiring.pacer(), power) if power is not None else None
    wiring.check_backend(backend, numerics)
    model = wiring.open_model(path) if path is not None else None
    if model is not None:
        tokenizer = wiring.tokenizer_from_model(model.file)
    else:
        tokenizer = wiring.tokenizer(None)
    runner = wiring.model_runner(
        model,
        backend=backend,
        numerics=numerics,
        threads=threads,
        script=script,
        script_tokenizer=tokenizer,
        script_token_delay=script_token_delay,
        streaming=streaming,
        repack_experts=repack_experts,
        distributed=distributed,
        log=log,
    )
    if steering is not None and model is not None:
        apply_steering(runner, steering, model.hparams)
    speculation = None
    if mtp is not None:
        if model is None:
            raise Ds4Error("--mtp needs a model (-m) and --backend cpu or reference")
        if not 1 <= mtp_draft <= MAX_MTP_DRAFT:
            raise Ds4Error(f"--mtp-draft {mtp_draft}: use 1..{MAX_MTP_DRAFT}")
        speculation = Speculation(wiring.draft_model(mtp, runner, model.hparams), mtp_draft)
    return Engine(tokenizer, runner, model, speculation, duty)


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


def eval_engine_answerer(engine: Engine, *, backend: str, chunk: int) -> EngineAnswerer:
    """ds4 eval's case answerer on a loaded engine; its session opens once the context
    is sized (EngineAnswerer.open)."""
    from ds4.adapters.eval.engine_answerer import EngineAnswerer

    return EngineAnswerer(engine.tokenizer, engine.runner, backend=backend, chunk=chunk)


# ---- the server ------------------------------------------------------------------


def bind_listener(host: str, port: int, max_connections: int) -> socket.socket:
    """The server's socket, bound (not yet listening); ListenError (exit 1) when the
    address is taken or cannot be resolved, Ds4Error when the open-file limit has no
    room for `max_connections`. Bound before the model loads."""
    from ds4.adapters.http.serve import bind_listener as bind
    from ds4.adapters.http.serve import ensure_fd_room

    ensure_fd_room(max_connections)
    return bind(host, port)


@dataclass
class BuiltServer:
    app: ASGIApp
    state: ServerState
    workers: tuple[Worker, ...] = ()  # one per live session (slot), in slot order
    gate: StepGate | None = None  # the batching step gate of --sessions N > 1

    def serve(self, listener: socket.socket) -> None:
        """Serve HTTP (uvicorn) on `listener` until a signal, which first stops the job
        queue; returns once the worker has saved the live session."""
        from ds4.adapters.http.serve import serve

        serve(self.app, self.state.inference, self.state.config, listener)


def bootstrap_server(
    options: ServerOptions,
    trace: TextIO | None = None,
    *,
    engine: Engine | None = None,
    store: KVStore | None = None,
    clock: Clock | None = None,
    random: RandomSource | None = None,
) -> BuiltServer:
    """The server's object graph. Whatever is passed in is used as it is; the rest
    comes from `options` through wiring (the model file is opened once, by load_engine).
    A `store` turns the disk KV cache on even without options.kv_disk_dir."""
    from ds4.adapters.http.app import build_app
    from ds4.adapters.http.metrics import ServerMetrics
    from ds4.adapters.http.server_state import HttpConfig, ServerState

    if not 1 <= options.sessions <= MAX_SESSIONS:
        raise Ds4Error(f"--sessions {options.sessions}: use 1..{MAX_SESSIONS}")
    if options.mtp is not None and options.sessions > 1:
        raise Ds4Error("--mtp works with one live session: drop --sessions or --mtp")
    prefix = _prefix_turns(options.prefix_file)  # a bad file fails before the model loads
    if engine is None:
        engine = load_engine(
            options.model,
            backend=options.backend,
            numerics=options.numerics,
            threads=options.threads,
            script=options.script,
            script_token_delay=options.script_token_delay,
            streaming=options.streaming,
            repack_experts=options.repack_experts,
            mtp=options.mtp,
            mtp_draft=options.mtp_draft,
            power=options.power,
            steering=options.steering,
            distributed=options.distributed,
            log=_placement_log,
        )
    random = random or wiring.random_source()
    memory = ToolReplayMemory(
        random, max_ids=options.tool_memory_max_ids, enabled=options.exact_tool_replay
    )
    lock = threading.Lock()
    write_trace = _trace_writer(trace)
    disk = _disk_cache(options, engine, write_trace, store, clock)
    checkpoints = _memory_checkpoints(options, engine, write_trace)
    sessions, gate = _live_sessions(engine.runner, options)
    workers = _workers(
        options, engine, sessions, gate, memory, lock, random, disk, checkpoints, write_trace
    )
    if workers[0].kv is not None:
        workers[0].kv.import_tool_memory()  # one tool memory for every slot
    config = HttpConfig(
        ctx=options.ctx,
        default_max_tokens=options.tokens,
        api_key=options.api_key,
        cors=options.cors,
        check_host=options.check_host,
        keepalive_seconds=options.keepalive_seconds,
        max_body_bytes=options.max_body_mb << 20,
        max_connections=options.max_connections,
        header_timeout=options.header_timeout,
        idle_timeout=options.idle_timeout,
        body_timeout=options.body_timeout,
    )
    inference = _job_queue(workers, gate)
    bindings = workers[0].live if gate is None else EverySlotBindings([w.live for w in workers])
    kv_dir = options.kv_disk_dir
    metrics = ServerMetrics(
        queue_depth=lambda: inference.waiting,
        active_sessions=lambda: inference.running,
        kv_disk_bytes=wiring.kv_disk_usage(kv_dir) if kv_dir is not None else None,
        expert_cache=wiring.expert_cache_stats(engine.runner),
    )
    state = ServerState(
        config,
        engine.tokenizer,
        memory,
        lock,
        random,
        inference,
        bindings,
        metrics=metrics,
        longest_token=longest_token_bytes(engine.tokenizer),
        prefix=prefix,
    )
    return BuiltServer(build_app(state), state, tuple(workers), gate)


def _prefix_turns(path: str | None) -> tuple[PrefixTurn, ...]:
    if path is None:
        return ()
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise Ds4Error(f"cannot read prefix file {path}: {exc.strerror}") from None
    return parse_prefix_file(data, path)


def _live_sessions(
    runner: ModelRunner, options: ServerOptions
) -> tuple[list[ComputeSession], StepGate | None]:
    """One session as it is, or N sessions behind one step gate that batches them."""
    if options.sessions == 1:
        return [runner.new_session(options.ctx)], None
    from ds4.adapters.compute.batching import StepGate

    gate = StepGate(runner)
    sessions = [runner.new_session(options.ctx) for _ in range(options.sessions)]
    for compute in sessions:
        gate.add(compute)  # slots numbered in the workers' order
    return sessions, gate


def _workers(
    options: ServerOptions,
    engine: Engine,
    sessions: list[ComputeSession],
    gate: StepGate | None,
    memory: ToolReplayMemory,
    memory_lock: threading.Lock,
    random: RandomSource,
    disk: DiskCache | None,
    checkpoints: MemoryCheckpoints | None,
    write_trace: Log,
) -> list[Worker]:
    """One worker per live session; with several, each has its own bindings, disk
    checkpoint frontier and trace tag, and they share the rest (the in-memory
    checkpoints too: any slot restores what another kept)."""
    disk_lock = threading.Lock()  # one disk cache for every slot
    workers = []
    for slot, compute in enumerate(sessions):
        tag = "" if len(sessions) == 1 else f"[slot {slot}] "
        trace = _tagged(write_trace, tag) if tag else write_trace
        kv = None
        if disk is not None:
            kv = KvCheckpoints(
                disk,
                engine.tokenizer,
                memory,
                memory_lock=memory_lock,
                disk_lock=disk_lock,
                log=_kv_log(trace),
            )
        workers.append(
            Worker(
                session=engine.session_over(compute, chunk=options.prefill_chunk, gate=gate),
                tokenizer=engine.tokenizer,
                memory=memory,
                random=random,
                default_max_tokens=options.tokens,
                memory_lock=memory_lock,
                trace=trace,
                kv=kv,
                mem=checkpoints,
                warn=_server_warning(tag),
            )
        )
    return workers


def _job_queue(workers: list[Worker], gate: StepGate | None) -> JobQueue:
    """One inference thread as before, or a pool of one per slot."""
    from ds4.adapters.http.inference_worker import InferenceWorker
    from ds4.adapters.http.slot_pool import SlotPool

    if gate is None:
        return InferenceWorker(workers[0])
    # the gate numbers its slots in the order the sessions were made: the workers' order
    return SlotPool([InferenceWorker(w) for w in workers], on_idle=gate.leave)


def _placement_log(line: str) -> None:
    """Where each distributed layer range runs, once at start (stderr)."""
    print(f"ds4 server: distributed {line}", file=sys.stderr)


def _trace_writer(trace: TextIO | None) -> Log:
    lock = threading.Lock()  # whole lines, also from several slots

    def write_trace(line: str) -> None:
        if trace is not None:
            with lock:
                trace.write(line + "\n")
                trace.flush()

    return write_trace


def _tagged(write: Log, tag: str) -> Log:
    """Each slot's trace lines start with its tag (the first line of an entry)."""

    def write_tagged(line: str) -> None:
        write(tag + line)

    return write_tagged


def _kv_log(write_trace: Log) -> Log:
    """KV cache lines go to the `ds4.kvcache` logger and the trace."""

    def log(line: str) -> None:
        kv_log.info(line)
        write_trace(line)

    return log


def _server_warning(tag: str) -> Log:
    def warn(line: str) -> None:
        server_log.warning("%s%s", tag, line)

    return warn


def _memory_checkpoints(
    options: ServerOptions, engine: Engine, write_trace: Log
) -> MemoryCheckpoints | None:
    """The in-memory KV checkpoints every slot shares (ADR 0049); None with no budget."""
    if options.kv_mem_bytes <= 0:
        return None
    return MemoryCheckpoints(
        options.kv_mem_bytes,
        engine.tokenizer,
        min_tokens=options.kv_cache.min_tokens,
        lock=threading.Lock(),
        log=_kv_log(write_trace),
    )


def _disk_cache(
    options: ServerOptions,
    engine: Engine,
    write_trace: Log,
    store: KVStore | None,
    clock: Clock | None,
) -> DiskCache | None:
    """The disk KV cache (--kv-disk-dir, or a store passed in). One eviction pass runs
    when it opens."""
    log = _kv_log(write_trace)
    if store is None:
        if options.kv_disk_dir is None:
            return None
        store = wiring.kv_store(options.kv_disk_dir, log)
    return DiskCache(
        store,
        clock or wiring.system_clock(),
        options.kv_cache,
        quant_bits=engine.runner.routed_quant_bits,
        model_tag=engine.model_tag(),
        log=log,
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
        engine = load_engine(
            options.model,
            backend=options.backend,
            threads=options.threads,
            script=options.script,
            script_token_delay=options.script_token_delay,
        )
    session = EngineSession(engine.runner.new_session(options.ctx), chunk=options.prefill_chunk)
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
