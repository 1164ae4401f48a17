"""The agent's tools as the model sees them and how their calls are read: the schemas
and which tools ask before running, the arguments' rules, and how a tool fails
(docs/agent.md "Tools").
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from ds4.domain.chat import ToolSchema, tool_schema
from ds4.domain.errors import Ds4Error

# --- tool catalog ---
# The agent's tools as the model sees them (names, parameters, descriptions) and which
# ones ask the user before running (docs/agent.md "Tools").
#
# The schemas go through the server's own tool-block renderer (domain.chat), so the
# model reads them exactly as it reads any API client's tools.

# Tools that change something or reach outside: a timed yes/no before each call.
CONFIRMED = frozenset({"write", "edit", "bash", "visit_page"})


def _string(description: str) -> dict[str, object]:
    return {"type": "string", "description": description}


def _number(description: str) -> dict[str, object]:
    return {"type": "number", "description": description}


def _boolean(description: str) -> dict[str, object]:
    return {"type": "boolean", "description": description}


def _tool(name: str, description: str, props: dict[str, object], required: list[str]) -> object:
    return {
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": props, "required": required},
    }


def _job_props() -> dict[str, object]:
    return {
        "job": _number("job id printed by bash"),
        "pid": _number("process id, used when job is 0"),
        "refresh_sec": _number("accepted for symmetry with bash; the call does not wait"),
    }


def _definitions(edit_upto: bool, web: bool) -> list[object]:
    old_help = "exact text to replace; it must occur exactly once in the file"
    if edit_upto:
        old_help += (
            "; or head lines, a line [upto], then unique tail lines: replaces from the "
            "head through the first tail match after it"
        )
    tools: list[object] = []
    if web:
        tools.append(
            _tool(
                "visit_page",
                "Open a web page in a headless browser and return its rendered text.",
                {"url": _string("http(s) address of the page")},
                ["url"],
            )
        )
    tools += [
        _tool(
            "bash",
            "Run a shell command in the working directory as a background job; returns "
            "its status and output after refresh_sec seconds or when it ends.",
            {
                "command": _string("the command line (/bin/sh -c)"),
                "timeout_sec": _number("kill the job after this many seconds (default 3600)"),
                "refresh_sec": _number("wait at most this long before reporting (default 60)"),
            },
            ["command"],
        ),
        _tool(
            "bash_status", "Report a running bash job's status and output.", _job_props(), ["job"]
        ),
        _tool("bash_stop", "Stop a bash job and report its final output.", _job_props(), ["job"]),
        _tool(
            "read",
            "Read a text file with line numbers, 500 lines at a time by default.",
            {
                "path": _string("file to read"),
                "start_line": _number("first line, 1-based (default 1)"),
                "max_lines": _number("lines to return (default 500)"),
                "whole": _boolean("read to the end of the file (only when really needed)"),
                "raw": _boolean("return the bytes without line numbers"),
            },
            ["path"],
        ),
        _tool(
            "more",
            "Continue the last read that stopped early.",
            {"count": _number("lines to return (default 500)")},
            [],
        ),
        _tool(
            "write",
            "Create a file or replace its whole content.",
            {"path": _string("file to write"), "content": _string("the complete new content")},
            ["path", "content"],
        ),
        _tool(
            "edit",
            "Replace one span of a file.",
            {
                "path": _string("file to edit"),
                "old": _string(old_help),
                "new": _string("replacement text"),
            },
            ["path", "old", "new"],
        ),
        _tool(
            "search",
            "Find lines matching a text or regular expression under a file or directory.",
            {
                "query": _string("text to find"),
                "path": _string("file or directory (default .)"),
                "mode": _string('"regex" for a regular expression, else literal text'),
                "glob": _string("only files whose name or path matches this pattern"),
                "context": _number("lines of context around each match, 0..5"),
                "max_results": _number("matching lines to show, 1..500 (default 50)"),
                "case_sensitive": _boolean("match case (default true)"),
            },
            ["query"],
        ),
        _tool(
            "list",
            "List a directory: kind, size and name of each entry.",
            {"path": _string("directory (default .)")},
            [],
        ),
    ]
    return tools


def agent_tool_schemas(*, edit_upto: bool, web: bool) -> list[ToolSchema]:
    return [tool_schema(d) for d in _definitions(edit_upto, web)]


def tool_names(*, web: bool) -> frozenset[str]:
    return frozenset(s.name for s in agent_tool_schemas(edit_upto=False, web=web))


# --- errors ---
# How a tool fails: the model sees `Tool error: <reason>` as the call's result.

TOOL_ERROR = "Tool error: "


class ToolError(Ds4Error):
    """A tool could not do what was asked; the message is the reason, without the
    `Tool error: ` prefix (tool_error adds it)."""


def tool_error(reason: str) -> str:
    return TOOL_ERROR + reason


# --- tool args ---
# A tool call's arguments as the agent's tools read them (docs/agent.md "Tools").
#
# The model writes every parameter as a DSML string or JSON literal; the parser hands
# over a JSON object. Numbers and booleans are accepted either way ("12" or 12, "yes" or
# true). An integer that does not parse takes the default, one out of range is clamped;
# a boolean accepts true/yes/1 and false/no/0 (any case), anything else is the default.

Args = Mapping[str, object]


def parse_arguments(text: str) -> dict[str, object]:
    """The arguments object of a call; ToolError when it is not a JSON object."""
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        raise ToolError("tool arguments are not a JSON object") from None
    if not isinstance(value, dict):
        raise ToolError("tool arguments are not a JSON object")
    return value


def arg_text(args: Args, name: str) -> str | None:
    """A string argument; a JSON number or literal counts as its text, null as absent."""
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _leading_int(text: str) -> int | None:
    """strtol's reading: optional blanks and sign, then decimal digits (the rest ignored)."""
    body = text.lstrip(" \t\n\r\f\v")
    sign = 1
    if body[:1] in "+-" and body:
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    digits = ""
    for ch in body:
        if not "0" <= ch <= "9":
            break
        digits += ch
    return sign * int(digits) if digits else None


def arg_int(args: Args, name: str, default: int, low: int, high: int) -> int:
    value = args.get(name)
    number: int | None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float):
        number = int(value) if math.isfinite(value) and abs(value) < 2**62 else None
    elif isinstance(value, str):
        number = _leading_int(value)
    else:
        number = None
    if number is None:
        return default
    return max(low, min(high, number))


_TRUE = ("true", "yes", "1")
_FALSE = ("false", "no", "0")


def arg_bool(args: Args, name: str, default: bool) -> bool:
    value = args.get(name)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0 if value in (0, 1) else default
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    return default


def required_text(args: Args, name: str, tool: str) -> str:
    """A string argument that must be present (`<tool> requires <name>` otherwise)."""
    value = arg_text(args, name)
    if value is None:
        raise ToolError(f"{tool} requires {name}")
    return value
