"""Tool calls: DSML text to calls (and back), and the exact-replay memory.

parse_tool_calls is dsml.parser.finish_turn, the parse every generated turn gets (with
the repairs of ADR 0020); render_tool_calls is the canonical JSON -> DSML rendering;
tool_memory builds the server's ToolReplayMemory (docs/reference/chat-and-dsml.md §4).
"""

from __future__ import annotations

from ds4.apps import wiring
from ds4.domain.dsml.parser import TurnResult, finish_turn
from ds4.domain.errors import Ds4Error
from ds4.domain.tools import DEFAULT_MAX_BYTES, DEFAULT_MAX_IDS, ToolReplayMemory
from ds4.lib._checks import int_in

MAX_MEMORY_IDS = 1 << 32
MAX_MEMORY_BYTES = 1 << 50


def parse_tool_calls(text: str, *, thinking: bool = False) -> TurnResult:
    """Split a generated assistant turn into reasoning, visible content and tool calls.

    thinking: the prompt ended with <think>, so `text` starts as reasoning and calls
    count only after the first </think>. A block cut between elements is closed
    (recovery REPAIRED); a malformed one comes back as content (AS_TEXT).
    """
    if not isinstance(text, str):
        raise Ds4Error(f"parse_tool_calls needs a str, not {type(text).__name__}")
    return finish_turn(text, tools_active=True, thinking=thinking, finish="stop")


def tool_memory(
    *, max_ids: int = DEFAULT_MAX_IDS, max_bytes: int = DEFAULT_MAX_BYTES
) -> ToolReplayMemory:
    """An empty memory of tool-call id -> the DSML block the model sampled, so a
    conversation sent back with JSON tool calls renders byte for byte as generated
    (and reuses the session's state). Least recently used ids go first beyond
    max_ids ids or max_bytes accounted bytes. Ids are drawn from the OS CSPRNG."""
    int_in("max_ids", max_ids, 1, MAX_MEMORY_IDS)
    int_in("max_bytes", max_bytes, 1, MAX_MEMORY_BYTES)
    return ToolReplayMemory(wiring.random_source(), max_ids=max_ids, max_bytes=max_bytes)
