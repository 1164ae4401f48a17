"""What `ds4 server` was asked for: the parsed flags the composition root builds from."""

from __future__ import annotations

from dataclasses import dataclass, field

from ds4.apps.engine_flags import DEFAULT_MTP_DRAFT, SteeringRequest
from ds4.domain.distributed import DistributedOptions
from ds4.domain.expert_cache import StreamingOptions
from ds4.domain.kvcache.policy import KvCacheOptions

# Prefill in chunks of ds4's own chunk size (the DSV4 payload header's), so a cancelled
# or disconnected request stops within one chunk and, with several sessions, the others'
# decode waits at most one chunk (ADR 0045). 0 prefills each prompt in one pass.
DEFAULT_PREFILL_CHUNK = 2048
MAX_SESSIONS = 64  # live sessions on one model (--sessions)
# In-memory KV checkpoints (ADR 0049): as much RAM as the disk cache's default budget.
DEFAULT_KV_MEM_MIB = 4096


@dataclass(frozen=True)
class ServerOptions:
    model: str | None  # GGUF path (None: scripted backend without a model)
    backend: str = "reference"
    numerics: str = "ds4"  # ds4 | exact | fp32 (exact: cpu backend only)
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
    prefill_chunk: int = DEFAULT_PREFILL_CHUNK
    sessions: int = 1  # live sessions decoded together (1: one, as before ADR 0045)
    mtp: str | None = None  # the MTP GGUF for speculative decoding (docs/mtp.md)
    mtp_draft: int = DEFAULT_MTP_DRAFT
    prefix_file: str | None = None  # USER:/ASSISTANT: turns before every conversation
    power: int = 100  # duty cycle in percent (docs/power-and-prefix.md)
    steering: SteeringRequest | None = None  # --dir-steering-* (docs/steering.md)
    keepalive_seconds: float = 5.0
    # request and connection limits (ADR 0044)
    max_body_mb: int = 64
    max_connections: int = 64
    header_timeout: float = 10.0
    idle_timeout: float = 30.0
    body_timeout: float = 120.0
    kv_disk_dir: str | None = None  # the disk KV cache directory (None: disabled)
    kv_cache: KvCacheOptions = field(default_factory=KvCacheOptions)
    streaming: StreamingOptions | None = None  # --ssd-streaming (docs/ssd-streaming.md)
    repack_experts: str = "auto"  # --repack-experts (ADR 0067)
    kv_mem_bytes: int = DEFAULT_KV_MEM_MIB << 20  # in-memory checkpoints (0: none)
    distributed: DistributedOptions | None = None  # layer ranges on Ray workers
