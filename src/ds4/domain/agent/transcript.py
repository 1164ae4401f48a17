"""What the model sees and what the trace records (docs/agent.md "What the model sees",
"Trace"): the session's opening text, the pieces appended to the token transcript, and
the --trace file's records.
"""

from __future__ import annotations

from collections.abc import Sequence

from ds4.domain.chat import (
    BOS,
    MAX_PREFIX,
    TOOL_RESULT_CLOSE,
    TOOL_RESULT_OPEN,
    USER,
    ThinkMode,
    ToolSchema,
    protect_tool_result,
    tools_system_text,
)
from ds4.ports.tokenizer import Tokenizer

# --- system prompt ---
# The text the agent's session starts with (docs/agent.md "What the model sees").
#
# BOS, the Think-Max prefix when that mode is on, the tool block exactly as the server
# renders tools for any client (so the model reads the same DSML instructions it was
# trained on), then the agent's working guidance and the user's extra system text.

DEFAULT_SYSTEM = "You are a helpful coding assistant running inside ds4 agent."

_ROLE = (
    "You are a coding agent working in a local workspace. Do file and system work "
    "through the tools instead of guessing; do not answer with whole files or long "
    "listings of code, and summarize what you did briefly.\n\n"
    "Call tools only after your thinking is finished: never inside <think></think>."
)
_READING = (
    "Reading: read returns 500 lines by default. When a file has more, call more with "
    "count=N for the next chunk (continue_offset is the next start_line). Use "
    "whole=true only when the user wants the entire file; it fails when the file would "
    "not fit in the context."
)
_EDITING = (
    "Editing: use write for new files and deliberate full rewrites, edit for changes. "
    "Give edit its path first, then old and new; old must match the file exactly once, "
    "byte for byte. To insert, use a unique anchor as old and the anchor plus the new "
    "text as new. Use read raw=true when you need the text without line numbers."
)
_UPTO = (
    "For a large replacement, make old a few unique head lines, then a line [upto], "
    "then a few tail lines that are unique after the head; the edit replaces from the "
    "head through that tail. Never use a generic tail such as a lone closing brace. "
    "Example: old = 'def load(path):\\n    with open(path) as f:\\n[upto]\\n    return "
    "table\\n' replaces the whole body of load through its return line."
)
_SHELL = (
    "Shell: bash runs a command as a background job in the working directory. For long "
    "commands pass refresh_sec; while a job runs, check it with bash_status and end it "
    "with bash_stop."
)
_WEB = "Web: visit_page returns the rendered text of a web page."
_RULES = (
    "Inference runs locally and is slow (hundreds of tokens per second to read, tens to "
    "write): read selectively and prefer small anchored edits to retyping files. Write "
    "reliable code from a clear model of the program, and leave the system's "
    "configuration alone unless asked."
)


def agent_guide(*, edit_upto: bool, web: bool) -> str:
    parts = [_ROLE, _READING, _EDITING]
    if edit_upto:
        parts.append(_UPTO)
    parts.append(_SHELL)
    if web:
        parts.append(_WEB)
    parts.append(_RULES)
    return "\n\n".join(parts)


def system_head(
    schemas: Sequence[ToolSchema], system: str, mode: ThinkMode, *, edit_upto: bool, web: bool
) -> str:
    """Everything before the first user turn."""
    text = BOS + (MAX_PREFIX if mode is ThinkMode.MAX else "")
    text += tools_system_text(schemas) + "\n\n" + agent_guide(edit_upto=edit_upto, web=web)
    if system:
        text += "\n\n" + system
    return text


def datetime_note(local_time: str) -> str:
    """Told once per session, before its first user turn."""
    return (
        f"\n\nThe session started at {local_time} (local time). Use the date and time "
        "only when they matter to the task."
    )


# --- transcript text ---
# The pieces the agent appends to its token transcript, rendered exactly as the
# server's chat renderer writes the same turns (docs/reference/chat-and-dsml.md §2.3):
# each piece starts at a special token, so encoding pieces one by one gives the ids of
# encoding the whole text.


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


# --- trace text ---
# The --trace file's escaping and token records (docs/agent.md "Trace").

_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"'}


def escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def text_record(label: str, text: str) -> str:
    return f'{label}="{escape(text)}"'


def token_records(tokenizer: Tokenizer, label: str, start: int, ids: Sequence[int]) -> list[str]:
    lines = [f"tokens label={label} start={start} len={len(ids)}"]
    for i, token in enumerate(ids):
        raw = tokenizer.token_bytes(token)
        shown = escape(raw.decode("utf-8", errors="replace"))
        lines.append(
            f'token index={start + i} id={token} bytes={len(raw)} text="{shown}" hex={raw.hex()}'
        )
    return lines
