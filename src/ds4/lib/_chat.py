"""Chat rendering: messages (or an OpenAI-style request body) to the exact prompt text;
and tool calls: DSML text to calls (and back), and the exact-replay memory.

The renderer is domain/chat's, the one the server and `ds4 cli --render-chat` use
(docs/reference/chat-and-dsml.md §2), so a prompt built here tokenizes to the ids the
server would evaluate for the same conversation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ds4.apps import wiring
from ds4.apps.flag_types import MAX_CTX
from ds4.domain.chat import (
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkMode,
    ToolResultMessage,
    ToolSchema,
    UserMessage,
    effective_think_mode,
    tool_schema,
)
from ds4.domain.chat import render_chat as render_messages
from ds4.domain.dsml.parser import TurnResult, finish_turn
from ds4.domain.errors import Ds4Error
from ds4.domain.tools import DEFAULT_MAX_BYTES, DEFAULT_MAX_IDS, ToolReplayMemory
from ds4.lib._session import int_in
from ds4.wire.chat import render_chat_request as render_body

THINK_NAMES = ", ".join(repr(m.value) for m in ThinkMode)


def _think_mode(think: ThinkMode | str) -> ThinkMode:
    if isinstance(think, ThinkMode):
        return think
    try:
        return ThinkMode(think)
    except ValueError:
        raise Ds4Error(f"think {think!r}: use one of {THINK_NAMES}") from None


def _checked_messages(messages: Sequence[Message]) -> list[Message]:
    """The renderer skips anything that is not a message; a caller's dict would vanish
    from the prompt without a word, so it is refused here."""
    kinds = (SystemMessage, UserMessage, AssistantMessage, ToolResultMessage)
    out = list(messages)
    for index, message in enumerate(out):
        if not isinstance(message, kinds):
            raise Ds4Error(
                f"messages[{index}] is a {type(message).__name__}, not a message "
                "(SystemMessage, UserMessage, AssistantMessage, ToolResultMessage; "
                "render_chat_request reads JSON messages)"
            )
    return out


def _schema(tool: object) -> ToolSchema:
    """An OpenAI `tools` entry ({"type": "function", "function": {...}}), its bare
    function object, or an Anthropic tool: as the server reads them."""
    if isinstance(tool, Mapping) and isinstance(tool.get("function"), Mapping):
        tool = tool["function"]
    return tool_schema(tool)


def render_chat(
    messages: Sequence[Message],
    *,
    tools: Sequence[Mapping[str, object]] = (),
    think: ThinkMode | str = ThinkMode.HIGH,
    ctx: int = MAX_CTX,
) -> str:
    """The prompt text for `messages`: BOS, the system region (tool block first), the
    turns, and, when a user or tool message is last, the assistant prefix that opens
    the reply (`<think>` when thinking, `</think>` when not).

    think: "high" (default), "none", or "max"; "max" needs ctx >= 393216 and renders
    as "high" below (the session's context size decides, as in the server).
    """
    int_in("ctx", ctx, 2, MAX_CTX)
    mode = effective_think_mode(_think_mode(think), ctx)
    return render_messages(_checked_messages(messages), [_schema(t) for t in tools], mode)


def render_chat_request(
    body: bytes | str | Mapping[str, object],
    *,
    think: ThinkMode | str | None = None,
    ctx: int = MAX_CTX,
) -> str:
    """The prompt text for an OpenAI chat-completions request body (JSON bytes or text,
    or the decoded object): its messages, tools, tool_choice and thinking controls
    read exactly as `POST /v1/chat/completions` reads them. think overrides the body's
    own thinking controls. Ds4Error (ChatRequestError) names what is wrong."""
    int_in("ctx", ctx, 2, MAX_CTX)
    if isinstance(body, Mapping):
        try:
            data = json.dumps(body, ensure_ascii=False).encode()
        except (TypeError, ValueError) as exc:
            raise Ds4Error(f"the request body is not JSON: {exc}") from None
    elif isinstance(body, str):
        data = body.encode()
    else:
        data = bytes(body)
    mode = None if think is None else _think_mode(think)
    return render_body(data, mode=mode, context_size=ctx)


# ---- tool calls ----------------------------------------------------------------------
# parse_tool_calls is dsml.parser.finish_turn, the parse every generated turn gets (with
# the repairs of ADR 0020); render_tool_calls is the canonical JSON -> DSML rendering;
# tool_memory builds the server's ToolReplayMemory (docs/reference/chat-and-dsml.md §4).


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
