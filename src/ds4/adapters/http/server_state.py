"""What the HTTP layer shares across requests: config, tokenizer, memory, the job queue,
the live bindings tool results are checked against, and the stored responses."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field

from ds4.adapters.http.inference_worker import JobQueue, LargeBodies
from ds4.adapters.http.metrics import ServerMetrics
from ds4.adapters.system import SystemClock
from ds4.domain.chat import PrefixTurn
from ds4.domain.serving.live import KnownIds
from ds4.domain.serving.response_store import ResponseStore
from ds4.domain.tools import ToolReplayMemory
from ds4.ports.constraint import ConstraintCompiler
from ds4.ports.system import Clock, RandomSource
from ds4.ports.tokenizer import Tokenizer
from ds4.wire.requests import DEFAULT_MODEL

MAX_BODY_BYTES = 64 * 1024 * 1024
MAX_HEADER_BYTES = 64 * 1024
KEEPALIVE_SECONDS = 5.0
# connection limits (ADR 0044)
MAX_CONNECTIONS = 64
HEADER_TIMEOUT = 10.0
IDLE_TIMEOUT = 30.0
BODY_TIMEOUT = 120.0


@dataclass(frozen=True)
class HttpConfig:
    ctx: int
    default_max_tokens: int
    model_id: str = DEFAULT_MODEL
    model_name: str = "DeepSeek V4 Flash"
    api_key: str | None = None
    cors: bool = False
    check_host: bool = True  # bound to loopback: refuse foreign Host headers
    max_body_bytes: int = MAX_BODY_BYTES
    keepalive_seconds: float = KEEPALIVE_SECONDS  # SSE comments while a stream is silent
    max_connections: int = MAX_CONNECTIONS
    header_timeout: float = HEADER_TIMEOUT  # a request head, start to end
    idle_timeout: float = IDLE_TIMEOUT  # a keep-alive connection between requests; body gaps
    body_timeout: float = BODY_TIMEOUT  # a request body, start to end

    def __post_init__(self) -> None:
        if self.api_key == "":
            raise ValueError("an empty API key would match no request (use None for no key)")


@dataclass
class ServerState:
    config: HttpConfig
    tokenizer: Tokenizer
    memory: ToolReplayMemory
    memory_lock: threading.Lock
    random: RandomSource
    inference: JobQueue  # one InferenceWorker, or a SlotPool with --sessions N
    bindings: KnownIds  # the live call ids (of every slot) a tool result may name
    metrics: ServerMetrics  # this server's own registry (docs/adr/0046-observability.md)
    longest_token: int | None = None  # bytes; prompt_bound refuses hopeless prompts early
    prefix: tuple[PrefixTurn, ...] = ()  # --prefix-file turns before every conversation
    # the reply grammars of docs/structured-outputs.md (None: such requests are refused)
    constraints: ConstraintCompiler | None = None
    strict_tools: bool = False  # --strict-tools: every tool's arguments follow its schema
    clock: Clock = field(default_factory=SystemClock)  # the replies' `created` stamps
    sequence: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    large_bodies: LargeBodies = field(default_factory=LargeBodies)
    # stored Responses (store, previous_response_id, GET/DELETE /v1/responses/{id})
    responses: ResponseStore = field(default_factory=ResponseStore)
