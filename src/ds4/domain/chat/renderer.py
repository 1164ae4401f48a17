"""Messages to the exact prompt text the model was trained on
(docs/reference/chat-and-dsml.md §2.3).

The output is text; the rendered-chat tokenizer turns the special strings in it
into their token ids. Special strings inside user data are left as they are on
purpose (the reference does the same; the model has always seen them that way) —
only a tool result's own closing tag is protected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ds4.domain.chat.constants import (
    ASSISTANT,
    BOS,
    EOS,
    MAX_PREFIX,
    THINK,
    TOOL_RESULT_CLOSE,
    TOOL_RESULT_OPEN,
    UNTHINK,
    USER,
)
from ds4.domain.chat.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkMode,
    ToolResultMessage,
    UserMessage,
)
from ds4.domain.chat.tool_schemas import ToolSchema, tools_system_text
from ds4.domain.dsml.syntax import render_tool_calls

_PROTECTED_RESULT_CLOSE = "&lt;" + TOOL_RESULT_CLOSE[1:]


def protect_tool_result(content: str) -> str:
    """Only the wrapper's own closing tag is rewritten; `<`, `>`, `&` stay literal."""
    return content.replace(TOOL_RESULT_CLOSE, _PROTECTED_RESULT_CLOSE)


def has_tool_context(messages: Sequence[Message], schemas: Sequence[ToolSchema]) -> bool:
    """Tools declared, or tool calls/results in the history: reasoning is then kept."""
    return bool(schemas) or any(
        isinstance(m, ToolResultMessage) or (isinstance(m, AssistantMessage) and m.tool_calls)
        for m in messages
    )


def system_text(messages: Sequence[Message], schemas: Sequence[ToolSchema]) -> str:
    """Tool block first, then every system/developer text (wherever it appears)."""
    parts = [tools_system_text(schemas)] if schemas else []
    parts += [m.content for m in messages if isinstance(m, SystemMessage)]
    return "\n\n".join(parts)


def assistant_prefix(mode: ThinkMode) -> str:
    return ASSISTANT + (THINK if mode.thinking else UNTHINK)


def _render_turns(
    messages: Sequence[Message], mode: ThinkMode, keep_reasoning: Callable[[int], bool]
) -> list[str]:
    """The turns as pieces; the caller joins them once (a prompt can be tens of MiB)."""
    out: list[str] = []
    want_assistant = in_results = False
    for index, message in enumerate(messages):
        if isinstance(message, UserMessage):
            out += (USER, message.content)
            want_assistant, in_results = True, False
        elif isinstance(message, ToolResultMessage):
            if not in_results:
                out.append(USER)  # consecutive results share one user turn
            out += (TOOL_RESULT_OPEN, protect_tool_result(message.content), TOOL_RESULT_CLOSE)
            want_assistant = in_results = True
        elif isinstance(message, AssistantMessage):
            if want_assistant:
                out.append(ASSISTANT)
                if mode.thinking and keep_reasoning(index):
                    out += (THINK, message.reasoning or "", UNTHINK)
                else:
                    out.append(UNTHINK)
            calls = message.raw_dsml or render_tool_calls(message.tool_calls)
            out += (message.content, calls, EOS)
            want_assistant = in_results = False
    if want_assistant:
        out.append(assistant_prefix(mode))
    return out


def render_closed_turns(messages: Sequence[Message], mode: ThinkMode) -> str:
    """Complete turns as history: each assistant turn closed with EOS, its reasoning
    dropped (as for answered turns without tools); no assistant prefix after them."""
    return "".join(_render_turns(messages, mode, lambda _index: False))


def unanswerable(messages: Sequence[Message]) -> str | None:
    """Why `messages` leave the model nothing to answer, or None when render_chat ends
    with the assistant prefix (a user or tool message after the last assistant one;
    system messages are hoisted, so their place does not count). An API refuses such a
    request: a prompt without the prefix would have the model write past an EOS or a
    bare BOS (docs/reference/chat-and-dsml.md §2.3: there is no assistant prefill)."""
    if not messages:
        return "empty: a conversation needs at least one user message"
    last = next((m for m in reversed(messages) if not isinstance(m, SystemMessage)), None)
    if last is None:
        return "no user message to answer (only system messages)"
    if isinstance(last, AssistantMessage):
        return (
            "nothing to answer after the final assistant turn; the last message must be "
            "a user message or a tool result (assistant prefill is not supported)"
        )
    return None


def render_chat(messages: Sequence[Message], schemas: Sequence[ToolSchema], mode: ThinkMode) -> str:
    """The whole prompt. `mode` is the effective one (see effective_think_mode).

    Ends with the assistant prefix when a user or tool message is last; a trailing
    assistant message is closed with EOS (there is no assistant prefill).
    """
    tool_context = has_tool_context(messages, schemas)
    last_user = max(
        (i for i, m in enumerate(messages) if isinstance(m, UserMessage | ToolResultMessage)),
        default=-1,
    )

    def keep_reasoning(index: int) -> bool:
        # Without tools the reasoning of answered turns is dropped, as in training.
        return tool_context or index > last_user

    head = [BOS, MAX_PREFIX if mode is ThinkMode.MAX else "", system_text(messages, schemas)]
    return "".join(head + _render_turns(messages, mode, keep_reasoning))


def render_continuation_tail(new_messages: Sequence[Message], mode: ThinkMode) -> str:
    """Text appended to a live session that ended at a sampled turn
    (docs/reference/chat-and-dsml.md §2.5): EOS closes that turn, then the new messages;
    reasoning is always kept."""
    return "".join([EOS, *_render_turns(new_messages, mode, lambda _index: True)])
