"""The composition root of `ds4 server`: its object graph over one engine.

`bootstrap_server` adds to the engine (bootstrap.load_engine) the worker (or, with
`--sessions N`, N slots over one batching step gate), the in-memory and disk KV
checkpoints and the HTTP app. Its adapters can be passed in already built (the
engine's runner and tokenizer, the KV store, the clock, the random source): tests pass
fakes and no file is opened. Like bootstrap.py it imports ds4.adapters lazily.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ds4.apps import backends, wiring
from ds4.apps.bootstrap import Engine, load_engine
from ds4.apps.options import MAX_SESSIONS, ServerOptions
from ds4.apps.server_logging import (
    Log,
    kv_trace_log,
    placement_log,
    server_warning,
    tagged,
    trace_writer,
)
from ds4.domain.chat import PrefixTurn, parse_prefix_file
from ds4.domain.errors import Ds4Error
from ds4.domain.kvcache.disk_cache import DiskCache
from ds4.domain.serving.checkpoints import KvCheckpoints, MemoryCheckpoints
from ds4.domain.serving.job import Worker
from ds4.domain.serving.live import EverySlotBindings
from ds4.domain.serving.prepare import longest_token_bytes
from ds4.domain.serving.response_store import ResponseStore
from ds4.domain.tools import ToolReplayMemory
from ds4.ports.compute import ComputeSession, ModelRunner
from ds4.ports.kv_store import KVStore
from ds4.ports.system import Clock, RandomSource

if TYPE_CHECKING:
    from ds4.adapters.compute.batching import StepGate
    from ds4.adapters.http.guard import ASGIApp
    from ds4.adapters.http.inference_worker import JobQueue
    from ds4.adapters.http.server_state import HttpConfig, ServerState


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
    from ds4.adapters.http.server_state import ServerState

    if not 1 <= options.sessions <= MAX_SESSIONS:
        raise Ds4Error(f"--sessions {options.sessions}: use 1..{MAX_SESSIONS}")
    if options.mtp is not None and options.sessions > 1:
        raise Ds4Error("--mtp works with one live session: drop --sessions or --mtp")
    prefix = _prefix_turns(options.prefix_file)  # a bad file fails before the model loads
    if engine is None:
        engine = load_engine(options, log=placement_log)
    random = random or wiring.random_source()
    memory = ToolReplayMemory(
        random, max_ids=options.tool_memory_max_ids, enabled=options.exact_tool_replay
    )
    lock = threading.Lock()
    write_trace = trace_writer(trace)
    disk = _disk_cache(options, engine, write_trace, store, clock)
    checkpoints = _memory_checkpoints(options, engine, write_trace)
    sessions, gate = _live_sessions(engine.runner, options)
    workers = _workers(
        options, engine, sessions, gate, memory, lock, random, disk, checkpoints, write_trace
    )
    if workers[0].kv is not None:
        workers[0].kv.import_tool_memory()  # one tool memory for every slot
    config = _http_config(options)
    inference = _job_queue(workers, gate)
    bindings = workers[0].live if gate is None else EverySlotBindings([w.live for w in workers])
    kv_dir = options.kv_disk_dir
    metrics = ServerMetrics(
        queue_depth=lambda: inference.waiting,
        active_sessions=lambda: inference.running,
        kv_disk_bytes=wiring.kv_disk_usage(kv_dir) if kv_dir is not None else None,
        expert_cache=backends.expert_cache_stats(engine.runner),
        hops=backends.hop_feed(engine.runner),
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
        constraints=wiring.constraint_compiler(engine.tokenizer),
        strict_tools=options.strict_tools,
        responses=_stored_responses(options, write_trace),
    )
    return BuiltServer(build_app(state), state, tuple(workers), gate)


def _http_config(options: ServerOptions) -> HttpConfig:
    """What the HTTP layer enforces: the adapter's own config, from the server options."""
    from ds4.adapters.http.server_state import HttpConfig

    return HttpConfig(
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
        trace = tagged(write_trace, tag) if tag else write_trace
        kv = None
        if disk is not None:
            kv = KvCheckpoints(
                disk,
                engine.tokenizer,
                memory,
                memory_lock=memory_lock,
                disk_lock=disk_lock,
                log=kv_trace_log(trace),
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
                warn=server_warning(tag),
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


def _stored_responses(options: ServerOptions, write_trace: Log) -> ResponseStore:
    """The stored Responses (docs/adr/0069-stored-responses.md): in memory, and with
    --kv-disk-dir also on disk, read back here."""
    log = kv_trace_log(write_trace)
    archive = None
    if options.kv_disk_dir is not None and options.stored_responses > 0:
        archive = wiring.response_archive(options.kv_disk_dir, log)
    store = ResponseStore(
        options.stored_responses,
        options.stored_responses_bytes,
        archive,
        lock=threading.Lock(),
        log=log,
    )
    store.load()
    return store


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
        log=kv_trace_log(write_trace),
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
    log = kv_trace_log(write_trace)
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
