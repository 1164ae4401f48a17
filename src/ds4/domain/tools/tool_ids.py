"""Tool-call ids: `call_` (OpenAI chat, Responses) or `toolu_` (Anthropic) + 32 hex digits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from ds4.ports.random_source import RandomSource

ToolApi = Literal["openai", "anthropic"]
ID_PREFIXES: dict[ToolApi, str] = {"openai": "call_", "anthropic": "toolu_"}
_ID_BYTES = 16
_MAX_DRAWS = 64


def new_tool_id(random: RandomSource, api: ToolApi, taken: Callable[[str], bool]) -> str:
    """A fresh id that `taken` rejects none of (redrawn on the rare collision)."""
    for _ in range(_MAX_DRAWS):
        candidate = ID_PREFIXES[api] + random.token_bytes(_ID_BYTES).hex()
        if not taken(candidate):
            return candidate
    # Only a broken random source collides this often; failing beats looping forever.
    raise RuntimeError("random source keeps repeating tool ids")
