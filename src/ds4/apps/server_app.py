"""Builds the server's object graph from parsed flags (the server part of wiring).

Kept apart from server_command so the flag table stays readable; the integration
tests build the same graph in-process through `build_server`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from ds4.adapters.http.app import build_app
from ds4.adapters.http.guard import ASGIApp
from ds4.adapters.http.inference_worker import InferenceWorker
from ds4.adapters.http.server_state import HttpConfig, ServerState
from ds4.apps import wiring
from ds4.domain.engine.session import Session
from ds4.domain.kvcache.policy import KvCacheOptions
from ds4.domain.serving.job import Worker
from ds4.domain.serving.kv_checkpoints import KvCheckpoints
from ds4.domain.tools.replay_memory import ToolReplayMemory
from ds4.ports.compute import ModelRunner
from ds4.ports.tokenizer import Tokenizer

kv_log = logging.getLogger("ds4.kvcache")


@dataclass(frozen=True)
class ServerOptions:
    model: str | None  # GGUF path (None: scripted backend without a model)
    backend: str = "reference"
    threads: int | None = None
    script: str | None = None
    script_token_delay: float = 0.0
    ctx: int = 32768
    tokens: int = 393216
    api_key: str | None = None
    cors: bool = False
    check_host: bool = True
    tool_memory_max_ids: int = 100_000
    exact_tool_replay: bool = True
    prefill_chunk: int = 0
    keepalive_seconds: float = 5.0
    kv_disk_dir: str | None = None  # the disk KV cache directory (None: disabled)
    kv_cache: KvCacheOptions = field(default_factory=KvCacheOptions)


@dataclass
class BuiltServer:
    app: ASGIApp
    state: ServerState


def build_server(options: ServerOptions, trace: TextIO | None = None) -> BuiltServer:
    tokenizer = wiring.tokenizer(options.model)
    runner = wiring.model_runner(
        options.model,
        backend=options.backend,
        threads=options.threads,
        script=options.script,
        script_tokenizer=tokenizer,
        script_token_delay=options.script_token_delay,
    )
    random = wiring.random_source()
    memory = ToolReplayMemory(
        random, max_ids=options.tool_memory_max_ids, enabled=options.exact_tool_replay
    )
    lock = threading.Lock()

    def write_trace(line: str) -> None:
        if trace is not None:
            trace.write(line + "\n")
            trace.flush()

    kv = _kv_checkpoints(options, runner, tokenizer, memory, lock, write_trace)
    worker = Worker(
        session=Session(runner.new_session(options.ctx), chunk=options.prefill_chunk),
        tokenizer=tokenizer,
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
    state = ServerState(config, tokenizer, memory, lock, random, InferenceWorker(worker))
    return BuiltServer(build_app(state), state)


def _kv_checkpoints(
    options: ServerOptions,
    runner: ModelRunner,
    tokenizer: Tokenizer,
    memory: ToolReplayMemory,
    lock: threading.Lock,
    write_trace: Callable[[str], None],
) -> KvCheckpoints | None:
    """The disk KV cache when --kv-disk-dir is given; its lines go to the log and trace."""
    if options.kv_disk_dir is None:
        return None

    def log(line: str) -> None:
        kv_log.info(line)
        write_trace(line)

    disk = wiring.kv_disk_cache(
        options.kv_disk_dir,
        options.kv_cache,
        quant_bits=runner.routed_quant_bits,
        model_tag=wiring.model_tag(options.model, runner),
        log=log,
    )
    kv = KvCheckpoints(disk, tokenizer, memory, memory_lock=lock, log=log)
    kv.import_tool_memory()
    return kv
