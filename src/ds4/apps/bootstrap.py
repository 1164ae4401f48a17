"""The composition roots: each app family's object graph, built in one place.

`load_engine` opens and validates the model GGUF once and shares that mapping: the
tokenizer is read from its metadata, the runner computes over its tensors and the KV
model tag hashes its identity. `ds4 cli` and `ds4 bench` use the engine alone;
`bootstrap_server` adds the worker, the disk KV cache and the HTTP app. The server's
adapters can be passed in already built (the engine's runner and tokenizer, the KV
store, the clock, the random source): tests pass fakes and no file is opened.

With wiring.py (which adapter serves each port) this is the only apps code that
imports ds4.adapters; those imports are lazy, so `ds4 cli` never loads the HTTP stack.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ds4.apps import wiring
from ds4.apps.server_options import ServerOptions
from ds4.domain.engine.session import Session
from ds4.domain.errors import Ds4Error
from ds4.domain.kvcache.disk_cache import DiskCache
from ds4.domain.kvcache.model_identity import model_tag_for
from ds4.domain.serving.job import Worker
from ds4.domain.serving.kv_checkpoints import KvCheckpoints
from ds4.domain.tools.replay_memory import ToolReplayMemory
from ds4.ports.clock import Clock
from ds4.ports.compute import ModelRunner
from ds4.ports.kv_store import KVStore
from ds4.ports.random_source import RandomSource
from ds4.ports.tokenizer import Tokenizer

if TYPE_CHECKING:
    from ds4.adapters.http.guard import ASGIApp
    from ds4.adapters.http.server_state import ServerState

kv_log = logging.getLogger("ds4.kvcache")
Log = Callable[[str], None]

# ---- the engine: cli, bench and the server ---------------------------------------


@dataclass(frozen=True)
class Engine:
    tokenizer: Tokenizer
    runner: ModelRunner
    model: wiring.OpenedModel | None = None  # None: no model file (scripted, or fakes)

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
            return path
    for candidate in (Path(DS4FLASH), shipped_demo_model()):
        if candidate.is_file():
            return str(candidate)
    raise Ds4Error(
        f"no model: pass -m FILE or set DS4_MODEL (looked for ./{DS4FLASH} and "
        f"{shipped_demo_model()}; a random test model: ds4 gguf tiny --out FILE)"
    )


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
) -> Engine:
    """Check the backend choice, open the model (if any) once, build tokenizer and
    runner over it. Without a model the tokenizer is the official tokenizer.json
    (the scripted backend's case)."""
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
    )
    return Engine(tokenizer, runner, model)


# ---- the server ------------------------------------------------------------------


@dataclass
class BuiltServer:
    app: ASGIApp
    state: ServerState

    def serve(self, host: str, port: int) -> None:
        """Serve HTTP (uvicorn) until a signal, which first stops the job queue."""
        from ds4.adapters.http.serve import serve

        serve(self.app, self.state.inference, host, port)


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
    from ds4.adapters.http.inference_worker import InferenceWorker
    from ds4.adapters.http.server_state import HttpConfig, ServerState

    if engine is None:
        engine = load_engine(
            options.model,
            backend=options.backend,
            threads=options.threads,
            script=options.script,
            script_token_delay=options.script_token_delay,
        )
    random = random or wiring.random_source()
    memory = ToolReplayMemory(
        random, max_ids=options.tool_memory_max_ids, enabled=options.exact_tool_replay
    )
    lock = threading.Lock()
    write_trace = _trace_writer(trace)
    kv = _kv_checkpoints(options, engine, memory, lock, write_trace, store, clock)
    worker = Worker(
        session=Session(engine.runner.new_session(options.ctx), chunk=options.prefill_chunk),
        tokenizer=engine.tokenizer,
        memory=memory,
        random=random,
        default_max_tokens=options.tokens,
        memory_lock=lock,
        trace=write_trace,
        kv=kv,
    )
    config = HttpConfig(
        ctx=options.ctx,
        default_max_tokens=options.tokens,
        api_key=options.api_key,
        cors=options.cors,
        check_host=options.check_host,
        keepalive_seconds=options.keepalive_seconds,
    )
    inference = InferenceWorker(worker)
    state = ServerState(config, engine.tokenizer, memory, lock, random, inference)
    return BuiltServer(build_app(state), state)


def _trace_writer(trace: TextIO | None) -> Log:
    def write_trace(line: str) -> None:
        if trace is not None:
            trace.write(line + "\n")
            trace.flush()

    return write_trace


def _kv_checkpoints(
    options: ServerOptions,
    engine: Engine,
    memory: ToolReplayMemory,
    lock: threading.Lock,
    write_trace: Log,
    store: KVStore | None,
    clock: Clock | None,
) -> KvCheckpoints | None:
    """The disk KV cache (--kv-disk-dir, or a store passed in); its lines go to the
    `ds4.kvcache` logger and the trace. One eviction pass runs when it opens."""

    def log(line: str) -> None:
        kv_log.info(line)
        write_trace(line)

    if store is None:
        if options.kv_disk_dir is None:
            return None
        store = wiring.kv_store(options.kv_disk_dir, log)
    disk = DiskCache(
        store,
        clock or wiring.system_clock(),
        options.kv_cache,
        quant_bits=engine.runner.routed_quant_bits,
        model_tag=engine.model_tag(),
        log=log,
    )
    kv = KvCheckpoints(disk, engine.tokenizer, memory, memory_lock=lock, log=log)
    kv.import_tool_memory()
    return kv
