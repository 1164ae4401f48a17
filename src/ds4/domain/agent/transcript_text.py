"""The pieces the agent appends to its token transcript, rendered exactly as the
server's chat renderer writes the same turns (docs/reference/chat-and-dsml.md §2.3):
each piece starts at a special token, so encoding pieces one by one gives the ids of
encoding the whole text."""

from __future__ import annotations

from collections.abc import Sequence

from ds4.domain.chat.constants import TOOL_RESULT_CLOSE, TOOL_RESULT_OPEN, USER
from ds4.domain.chat.renderer import protect_tool_result


def user_turn(text: str) -> str:
    return USER + text


def tool_turn(text: str) -> str:
    """A tool result as the user turn that carries it; only the wrapper's own close
    tag inside the text is neutralized."""
    return USER + TOOL_RESULT_OPEN + protect_tool_result(text) + TOOL_RESULT_CLOSE


def combined_results(results: Sequence[tuple[str, str]]) -> str:
    """Several calls' results as one message: `Tool result <i> (<name>):` headers."""
    parts = []
    for index, (name, text) in enumerate(results, start=1):
        body = text if text.endswith("\n") else text + "\n"
        parts.append(f"Tool result {index} ({name}):\n{body}")
    return "".join(parts)


def queued_message(texts: Sequence[str]) -> str:
    """Prompts typed while the model worked, delivered as one user message."""
    if len(texts) == 1:
        return texts[0]
    return "\n\n".join(f"Queued user message {i}:\n{t}" for i, t in enumerate(texts, start=1))
