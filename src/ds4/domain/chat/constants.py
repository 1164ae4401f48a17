"""Byte-exact strings of the DeepSeek V4 chat template (docs/reference/chat-and-dsml.md §2.1).

A unit test pins the SHA-1 of MAX_PREFIX, TOOLS_HEAD and TOOLS_TAIL.
"""

from __future__ import annotations

from ds4.domain.dsml.syntax import DSML_MARKER, THINK_CLOSE, THINK_OPEN

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
