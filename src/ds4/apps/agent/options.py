"""What `ds4 agent` was asked for: the parsed flags the composition root builds from."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ds4.apps.server_options import DEFAULT_PREFILL_CHUNK
from ds4.domain.agent.core import AgentSettings
from ds4.domain.errors import Ds4Error

DEFAULT_CTX = 100_000
HOME_ENV = "DS4_AGENT_HOME"


@dataclass(frozen=True)
class AgentOptions:
    model: str | None  # GGUF path (None: the scripted backend without a model)
    backend: str = "reference"
    threads: int | None = None
    script: str | None = None
    script_token_delay: float = 0.0
    ctx: int = DEFAULT_CTX
    prefill_chunk: int = DEFAULT_PREFILL_CHUNK
    settings: AgentSettings = field(default_factory=AgentSettings)
    web: bool = True  # offer visit_page
    home: str | None = None  # saved sessions and input history (None: neither)
    cwd: str = "."


def agent_home() -> Path:
    """$DS4_AGENT_HOME, else ~/.ds4/agent; created with mode 0700 when missing."""
    named = os.environ.get(HOME_ENV)
    home = Path(named) if named else Path.home() / ".ds4" / "agent"
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise Ds4Error(f"cannot create the agent directory {home}: {exc.strerror}") from None
    if not home.is_dir():
        raise Ds4Error(f"the agent directory {home} is not a directory")
    return home
