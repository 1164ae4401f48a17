"""The DeepSeek V4 chat template (docs/reference/chat-and-dsml.md §2): its byte-exact
strings, messages and thinking modes, tool schemas and their prompt text, messages
rendered to the exact prompt text the model was trained on, and `--prefix-file`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from enum import Enum

import msgspec

from ds4.domain.dsml.syntax import DSML_MARKER, THINK_CLOSE, THINK_OPEN, ToolCall, render_tool_calls
from ds4.domain.errors import Ds4Error

# --- constants ---
# Byte-exact strings of the DeepSeek V4 chat template (docs/reference/chat-and-dsml.md §2.1).
#
# A unit test pins the SHA-1 of MAX_PREFIX, TOOLS_HEAD and TOOLS_TAIL.

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
THINK = THINK_OPEN  # the turn markers are defined once, with the other generated-text syntax
UNTHINK = THINK_CLOSE
DSML = DSML_MARKER
TOOL_RESULT_OPEN = "<tool_result>"
TOOL_RESULT_CLOSE = "</tool_result>"

# The strings the rendered-chat tokenizer turns into single special tokens.
SPECIAL_STRINGS = (BOS, EOS, USER, ASSISTANT, THINK, UNTHINK, DSML)

# DeepSeek recommends Think Max only with >= 384 Ki tokens of context.
THINK_MAX_MIN_CONTEXT = 393_216

MAX_PREFIX = (
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem"
    " to resolve the root cause, rigorously stress-testing your logic against all potential"
    " paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate"
    " step, considered alternative, and rejected hypothesis to ensure absolutely no"
    " assumption is left unchecked.\n"
    "\n"
)

TOOLS_HEAD = (
    "## Tools\n"
    "\n"
    "You have access to a set of tools to help answer the user question. You can invoke"
    ' tools by writing a "<｜DSML｜tool_calls>" block like the following:\n'
    "\n"
    "<｜DSML｜tool_calls>\n"
    '<｜DSML｜invoke name="$TOOL_NAME">\n'
    '<｜DSML｜parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE'
    "</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    '<｜DSML｜invoke name="$TOOL_NAME2">\n'
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n"
    "\n"
    'String parameters should be specified as raw text and set `string="true"`. Preserve'
    " characters such as `>`, `&`, and `&&` exactly; never replace normal string characters"
    " with XML or HTML entity escapes. Only if a string value itself contains the exact"
    " closing parameter tag `</｜DSML｜parameter>`, write that tag as"
    " `&lt;/｜DSML｜parameter>` inside the value. For all other types (numbers, booleans,"
    ' arrays, objects), pass the value in JSON format and set `string="false"`.\n'
    "\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete"
    " reasoning inside <think>...</think> BEFORE any tool calls or final response.\n"
    "\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n"
    "\n"
    "### Available Tool Schemas\n"
    "\n"
)

TOOLS_TAIL = (
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke"
    " tool calls. Use the exact parameter names from the schemas."
)


# --- messages ---
# Chat messages and thinking modes as the renderer consumes them.
#
# API layers map their wire shapes onto these (developer -> SystemMessage, tool and
# function results -> ToolResultMessage); the renderer never sees JSON.


class ThinkMode(Enum):
    NONE = "none"  # non-think: the assistant prefix closes thinking at once
    HIGH = "high"  # think
    MAX = "max"  # think-max: HIGH plus the Reasoning Effort prefix after BOS

    @property
    def thinking(self) -> bool:
        return self is not ThinkMode.NONE


def effective_think_mode(requested: ThinkMode, context_size: int) -> ThinkMode:
    """Think Max needs a session of at least 384 Ki tokens; below that it is Think."""
    if requested is ThinkMode.MAX and context_size < THINK_MAX_MIN_CONTEXT:
        return ThinkMode.HIGH
    return requested


class SystemMessage(msgspec.Struct, frozen=True, tag_field="role", tag="system"):
    content: str = ""


class UserMessage(msgspec.Struct, frozen=True, tag_field="role", tag="user"):
    content: str = ""


class AssistantMessage(msgspec.Struct, frozen=True, tag_field="role", tag="assistant"):
    content: str = ""
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    # The exact DSML block the model sampled for these calls (tool replay memory);
    # rendered verbatim instead of the canonical JSON -> DSML form.
    raw_dsml: str | None = None


class ToolResultMessage(msgspec.Struct, frozen=True, tag_field="role", tag="tool"):
    content: str = ""
    tool_call_id: str = ""


Message = SystemMessage | UserMessage | AssistantMessage | ToolResultMessage


# --- tool schemas ---
# Tool schemas and their canonical prompt text (docs/reference/chat-and-dsml.md §2.4,
# ADR 0020).
#
# Each schema is re-serialized the way DeepSeek's own encoder writes it: object key
# order kept, ", " and ": " separators, UTF-8 characters raw instead of \u escapes.
# So semantically equal requests give byte-identical prompts (and cache hits).


class ToolSchemaError(Ds4Error):
    """A tool schema that cannot be rendered."""


class ToolSchema(msgspec.Struct, frozen=True):
    """One tool as the model sees it: its name and its canonical JSON line."""

    name: str
    line: str


def canonical_json(value: object) -> str:
    """json.dumps(value, ensure_ascii=False) for JSON values, refusing non-finite numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolSchemaError("tool schema contains a number that is not finite")
    if isinstance(value, Mapping):
        items = (
            f"{json.dumps(str(k), ensure_ascii=False)}: {canonical_json(v)}"
            for k, v in value.items()
        )
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(canonical_json(v) for v in value) + "]"
    if value is None or isinstance(value, bool | int | float | str):
        return json.dumps(value, ensure_ascii=False)
    raise ToolSchemaError(f"tool schema contains a non-JSON value of type {type(value).__name__}")


def tool_schema(definition: object) -> ToolSchema:
    """A schema from the decoded definition object (the OpenAI `function` value or an
    Anthropic tool as sent)."""
    if not isinstance(definition, Mapping):
        raise ToolSchemaError("tool schema must be a JSON object")
    name = definition.get("name")
    if not isinstance(name, str) or not name:
        raise ToolSchemaError("tool schema needs a non-empty string 'name'")
    return ToolSchema(name=name, line=canonical_json(definition))


def tools_system_text(schemas: Sequence[ToolSchema]) -> str:
    """The tool block that opens the system region ("" without tools)."""
    if not schemas:
        return ""
    return TOOLS_HEAD + "\n".join(s.line for s in schemas) + TOOLS_TAIL


# --- renderer ---
# Messages to the exact prompt text the model was trained on
# (docs/reference/chat-and-dsml.md §2.3).
#
# The output is text; the rendered-chat tokenizer turns the special strings in it
# into their token ids. Special strings inside user data are left as they are on
# purpose (the reference does the same; the model has always seen them that way) —
# only a tool result's own closing tag is protected.

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


# --- prefix file ---
# `--prefix-file`: a conversation prefix of complete `USER:`/`ASSISTANT:` turns,
# rendered before the live conversation (docs/reference/cli-and-bench.md §1.1).
#
#     USER: You are a calculator that always answers directly.
#     ASSISTANT: 6*7 = 42
#
# A turn starts at the beginning of a line with `USER:` or `ASSISTANT:` (exactly), one
# space or tab after the marker is skipped, and its text runs to the next marker line
# or the end of the file, less one trailing newline (and a carriage return before it).
# Turns alternate from USER and end with ASSISTANT; none is empty. A UTF-8 BOM is
# skipped; a NUL byte, an empty file or text that is not UTF-8 is an error.

_BOM = b"\xef\xbb\xbf"
_MARKERS = ("USER:", "ASSISTANT:")

PrefixTurn = UserMessage | AssistantMessage


def parse_prefix_file(data: bytes, path: str) -> tuple[PrefixTurn, ...]:
    """The turns of a prefix file's bytes; Ds4Error `<path>: <problem>` otherwise."""

    def fail(problem: str) -> Ds4Error:
        return Ds4Error(f"{path}: {problem}")

    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    nul = data.find(b"\0")
    if nul >= 0:
        raise fail(f"NUL byte at offset {nul}")
    if not data:
        raise fail("the prefix file is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(f"not UTF-8 (byte {exc.start})") from None
    turns: list[tuple[str, int, list[str]]] = []  # (marker, line number, text lines)
    for number, line in enumerate(text.split("\n"), start=1):
        marker = next((m for m in _MARKERS if line.startswith(m)), None)
        if marker is None:
            if not turns:
                raise fail(f"line {number} must start with USER: or ASSISTANT:")
            turns[-1][2].append(line)
            continue
        expected = _MARKERS[len(turns) % 2]
        if marker != expected:
            raise fail(f"line {number}: expected {expected}")
        rest = line[len(marker) :]
        if rest[:1] in (" ", "\t"):
            rest = rest[1:]
        turns.append((marker, number, [rest]))
    if turns[-1][0] != "ASSISTANT:":
        raise fail("prefix file must end with an ASSISTANT turn")
    out: list[PrefixTurn] = []
    for i, (marker, number, lines) in enumerate(turns):
        # the text up to the next marker line (its newline included), less one newline
        content = "\n".join(lines) + ("\n" if i + 1 < len(turns) else "")
        if content.endswith("\n"):
            content = content[:-1]
            if content.endswith("\r"):
                content = content[:-1]
        if not content:
            raise fail(f"line {number} has an empty {marker[:-1]} turn")
        out.append(UserMessage(content) if marker == "USER:" else AssistantMessage(content))
    return tuple(out)


def with_prefix(
    messages: tuple[Message, ...], prefix: tuple[PrefixTurn, ...]
) -> tuple[Message, ...]:
    """The prefix turns before a conversation (system texts are hoisted wherever they
    are, so they stay first in the rendered prompt)."""
    return (*prefix, *messages) if prefix and messages else messages
