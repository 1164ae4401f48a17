"""The agent's tools as the model sees them (names, parameters, descriptions) and which
ones ask the user before running (docs/agent.md "Tools").

The schemas go through the server's own tool-block renderer (chat.tool_schemas), so the
model reads them exactly as it reads any API client's tools.
"""

from __future__ import annotations

from ds4.domain.chat.tool_schemas import ToolSchema, tool_schema

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
