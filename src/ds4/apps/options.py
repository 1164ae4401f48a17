"""What each app was asked for: one frozen options object per concern, built once from
the parsed flags (engine_flags.engine_options and each command's own builder) and passed
whole to the composition root (bootstrap.py).

The engine's options are the base of the others: `ds4 server`, `ds4 agent` and
`ds4 eval` each load one engine, so their options are EngineOptions plus their own
fields, and bootstrap hands the same object to load_engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ds4.domain.agent.core import AgentSettings
from ds4.domain.distributed import DistributedOptions
from ds4.domain.expert_cache import StreamingOptions
from ds4.domain.kvcache.policy import KvCacheOptions
from ds4.domain.serving.response_store import DEFAULT_STORED_MIB, DEFAULT_STORED_RESPONSES

DEFAULT_MTP_DRAFT = 2  # tokens drafted per step (docs/mtp.md: measured, and why)
MAX_MTP_DRAFT = 16

# Prefill in chunks of ds4's own chunk size (the DSV4 payload header's), so a cancelled
# or disconnected request stops within one chunk and, with several sessions, the others'
# decode waits at most one chunk (ADR 0045). 0 prefills each prompt in one pass.
DEFAULT_PREFILL_CHUNK = 2048
MAX_SESSIONS = 64  # live sessions on one model (--sessions)
# In-memory KV checkpoints (ADR 0049): as much RAM as the disk cache's default budget.
DEFAULT_KV_MEM_MIB = 4096

DEFAULT_AGENT_CTX = 100_000


@dataclass(frozen=True)
class SteeringRequest:
    """The --dir-steering-* flags as given (None: not given)."""

    file: str | None = None
    attn: float | None = None
    ffn: float | None = None


# ---- the engine: every command that loads a model -----------------------------------


@dataclass(frozen=True)
class EngineOptions:
    """Which model on which backend, and the engine knobs around it (load_engine)."""

    model: str | None  # GGUF path (None: no model file, as the scripted backend)
    backend: str = "reference"  # a name in backends.BACKENDS
    numerics: str = "ds4"  # ds4 | exact | fp32 (the backend's spec says which it runs)
    threads: int | None = None  # the cpu backend's kernel pool (None: every core)
    script: str | None = None  # the scripted backend's outputs
    script_token_delay: float = 0.0
    streaming: StreamingOptions | None = None  # --ssd-streaming (docs/ssd-streaming.md)
    repack_experts: str = "auto"  # --repack-experts (ADR 0067)
    mtp: str | None = None  # the MTP GGUF for speculative decoding (docs/mtp.md)
    mtp_draft: int = DEFAULT_MTP_DRAFT
    power: int | None = None  # duty cycle in percent (None: no pacing at all, as bench)
    steering: SteeringRequest | None = None  # --dir-steering-* (docs/steering.md)
    distributed: DistributedOptions | None = None  # layer ranges on Ray workers


# ---- ds4 server ----------------------------------------------------------------------


@dataclass(frozen=True)
class ServerOptions(EngineOptions):
    power: int | None = 100  # the server paces by default (docs/power-and-prefix.md)
    ctx: int = 32768
    tokens: int = 393216
    api_key: str | None = None
    cors: bool = False
    check_host: bool = True
    tool_memory_max_ids: int = 100_000
    exact_tool_replay: bool = True
    prefill_chunk: int = DEFAULT_PREFILL_CHUNK
    sessions: int = 1  # live sessions decoded together (1: one, as before ADR 0045)
    # stored Responses: how many, and their records' bytes (docs/adr/0069)
    stored_responses: int = DEFAULT_STORED_RESPONSES
    stored_responses_bytes: int = DEFAULT_STORED_MIB << 20
    prefix_file: str | None = None  # USER:/ASSISTANT: turns before every conversation
    keepalive_seconds: float = 5.0
    # request and connection limits (ADR 0044)
    max_body_mb: int = 64
    max_connections: int = 64
    header_timeout: float = 10.0
    idle_timeout: float = 30.0
    body_timeout: float = 120.0
    kv_disk_dir: str | None = None  # the disk KV cache directory (None: disabled)
    kv_cache: KvCacheOptions = field(default_factory=KvCacheOptions)
    kv_mem_bytes: int = DEFAULT_KV_MEM_MIB << 20  # in-memory checkpoints (0: none)
    strict_tools: bool = False  # every tool strict (docs/structured-outputs.md)


# ---- ds4 agent -----------------------------------------------------------------------


@dataclass(frozen=True)
class AgentOptions(EngineOptions):
    ctx: int = DEFAULT_AGENT_CTX
    prefill_chunk: int = DEFAULT_PREFILL_CHUNK
    settings: AgentSettings = field(default_factory=AgentSettings)
    web: bool = True  # offer visit_page
    home: str | None = None  # saved sessions and input history (None: neither)
    cwd: str = "."


# ---- ds4 eval ------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalOptions(EngineOptions):
    """The engine a `ds4 eval` run answers with (the run's own settings are
    eval_run.RunSettings)."""

    ctx: int | None = None  # None: sized to the longest case (docs/reference/eval.md §3.1)
    prefill_chunk: int = DEFAULT_PREFILL_CHUNK
