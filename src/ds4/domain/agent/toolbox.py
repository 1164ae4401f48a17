"""The agent's tools: arguments checked, confirmation decided, then run against the
workspace, shell and browser ports (docs/agent.md "Tools").

`plan` reads a call and says whether it may run without asking (tools that change
something or reach outside always ask, and any path outside the working directory
asks); `run` does it. Every failure comes back as `Tool error: <reason>` text.
"""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.agent.file_tools import (
    DEFAULT_LINES,
    ReadCursor,
    SearchQuery,
    SearchReport,
    apply_edit,
    edit_report,
    glob_allows,
    is_inside,
    list_report,
    read_chunk,
    select_span,
)
from ds4.domain.agent.tool_catalog import (
    CONFIRMED,
    Args,
    ToolError,
    arg_bool,
    arg_int,
    arg_text,
    parse_arguments,
    required_text,
    tool_error,
    tool_names,
)
from ds4.domain.dsml.syntax import ToolCall
from ds4.domain.engine.cancel import CancelCheck
from ds4.ports.agent import Browser, FileStamp, JobSnapshot, Shell, Workspace

# --- bash tool ---
# `bash`, `bash_status`, `bash_stop`: what the model sees of a background job
# (docs/agent.md "Tools", bash).
#
# The first observation of a job shows the head of its output (at most 100 lines and
# 8 KiB), whole and inline when the job is done and that is all of it; later ones show
# the tail (4 lines while running, 20 once done, from the last 32 KiB). A finished job
# leaves the table once its final observation is returned.

HEAD_LINES = 100
HEAD_BYTES = 8 << 10
TAIL_WINDOW = 32 << 10
TAIL_RUNNING = 4
TAIL_DONE = 20
DEFAULT_TIMEOUT = 3600
DEFAULT_REFRESH = 60


def _head(data: bytes) -> bytes:
    lines = data.split(b"\n")
    if len(lines) > HEAD_LINES:
        return b"\n".join(lines[:HEAD_LINES])
    return data


def _tail(data: bytes, count: int) -> bytes:
    lines = data.rstrip(b"\n").split(b"\n")
    return b"\n".join(lines[-count:])


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").rstrip("\n")


def status_lines(snap: JobSnapshot) -> str:
    if snap.running:
        return (
            f"bash job={snap.job} pid={snap.pid} status=running elapsed_sec={snap.elapsed:.1f} "
            f"timeout_sec={snap.timeout_sec}"
        )
    return (
        f"bash job={snap.job} pid={snap.pid} status=done elapsed_sec={snap.elapsed:.1f} "
        f"timed_out={int(snap.timed_out)}\nexit_status={snap.exit_status}"
    )


class BashJobs:
    """The model's view of the shell's jobs: which have been observed, what to show."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell
        self._observed: set[int] = set()

    def observe(self, snap: JobSnapshot) -> str:
        out = [status_lines(snap)]
        path = snap.output_path
        stats = f"output_path={path} ({snap.output_bytes} bytes, {snap.output_lines} lines)"
        if snap.output_bytes == 0:
            out.append("<output>\n</output>")
        elif snap.job not in self._observed:
            head = _head(self.shell.read_output(snap.job, 0, HEAD_BYTES))
            if not snap.running and len(head) >= snap.output_bytes:
                out.append(f"<output>\n{_text(head)}\n</output>")
            else:
                out.append(f"{stats}\n<head -{HEAD_LINES} {path}>\n{_text(head)}\n</head>")
        else:
            count = TAIL_RUNNING if snap.running else TAIL_DONE
            start = max(0, snap.output_bytes - TAIL_WINDOW)
            window = self.shell.read_output(snap.job, start, snap.output_bytes - start)
            out.append(f"{stats}\n<tail -{count} {path}>\n{_text(_tail(window, count))}\n</tail>")
        self._observed.add(snap.job)
        if snap.running:
            out.append(
                f"\nUse bash_status job={snap.job} to get info before refresh time; "
                f"use bash_stop job={snap.job} to stop execution"
            )
        else:
            self._observed.discard(snap.job)
            self.shell.forget(snap.job)
        return "\n".join(out) + "\n"

    def running_updates(self) -> str:
        """After a compaction: the jobs still in the table, each observed again."""
        parts = []
        for job in self.shell.jobs():
            parts.append(f"\nJob {job}:\n" + self.observe(self.shell.snapshot(job)))
        return "".join(parts)


# --- the toolbox ---

INT_LIMIT = 2**31 - 1
SEARCH_DEPTH = 24
PAGE_LIMIT = 64 << 10  # characters of a page handed to the model


@dataclass(frozen=True)
class PlannedCall:
    name: str
    args: dict[str, object]
    question: str | None = None  # None: runs without asking
    error: str | None = None  # the call cannot run (already `Tool error: ...`)


def _path_arg(args: Args, tool: str, default: str | None = None) -> str:
    value = arg_text(args, "path")
    if value is None or value == "":
        if default is None:
            raise ToolError(f"{tool} requires path")
        return default
    return value


class ToolBox:
    def __init__(
        self, workspace: Workspace, shell: Shell, browser: Browser | None, *, edit_upto: bool
    ) -> None:
        self.workspace = workspace
        self.browser = browser
        self.jobs = BashJobs(shell)
        self.edit_upto = edit_upto
        self.names = tool_names(web=browser is not None)
        self._cursor: ReadCursor | None = None
        self._stamps: dict[str, FileStamp] = {}  # resolved path -> as the agent last saw it

    # ---- deciding -------------------------------------------------------------

    def _outside(self, path: str) -> bool:
        return not is_inside(self.workspace.root, self.workspace.resolve(path))

    def plan(self, call: ToolCall) -> PlannedCall:
        name = call.name
        if name not in self.names:
            return PlannedCall(name, {}, error=tool_error(f"unknown tool: {name}"))
        try:
            args = parse_arguments(call.arguments)
            question = self._question(name, args)
        except ToolError as exc:
            return PlannedCall(name, {}, error=tool_error(str(exc)))
        return PlannedCall(name, args, question=question)

    def _question(self, name: str, args: Args) -> str | None:
        if name in ("read", "list", "search", "write", "edit"):
            path = _path_arg(args, name, None if name in ("read", "write", "edit") else ".")
            where = " (outside the working directory)" if self._outside(path) else ""
            if name == "write":
                content = required_text(args, "content", "write")
                return f"Write {len(content.encode())} bytes to {path}{where}?"
            if name == "edit":
                return f"Edit {path}{where}?"
            return f"Allow {name} of {path}{where}?" if where else None
        if name == "bash":
            return f"Run `{required_text(args, 'command', 'bash')}`?"
        if name == "visit_page":
            return f"Open {required_text(args, 'url', 'visit_page')}?"
        assert name not in CONFIRMED
        return None

    # ---- running --------------------------------------------------------------

    def run(self, planned: PlannedCall, cancel: CancelCheck) -> str:
        if planned.error is not None:
            return planned.error
        try:
            return self._dispatch(planned.name, planned.args, cancel)
        except ToolError as exc:
            return tool_error(str(exc))

    def _dispatch(self, name: str, args: Args, cancel: CancelCheck) -> str:
        if name == "read":
            return self._read(args)
        if name == "more":
            return self._more(args)
        if name == "write":
            return self._write(args)
        if name == "edit":
            return self._edit(args)
        if name == "list":
            path = _path_arg(args, "list", ".")
            return list_report(path, self.workspace.list_dir(path))
        if name == "search":
            return self._search(args)
        if name == "visit_page":
            return self._visit(args, cancel)
        return self._bash(name, args, cancel)

    def _remember(self, path: str) -> None:
        stamp = self.workspace.stamp(path)
        if stamp is not None:
            self._stamps[self.workspace.resolve(path)] = stamp

    def _check_unchanged(self, path: str) -> None:
        seen = self._stamps.get(self.workspace.resolve(path))
        if seen is not None and self.workspace.stamp(path) != seen:
            raise ToolError(
                f"{path} changed since the agent last read or wrote it; read it again first"
            )

    def _read(self, args: Args) -> str:
        path = _path_arg(args, "read")
        data = self.workspace.read(path)
        max_lines = arg_int(args, "max_lines", DEFAULT_LINES, 1, INT_LIMIT)
        result = read_chunk(
            path,
            data,
            start=arg_int(args, "start_line", 1, 1, INT_LIMIT),
            max_lines=max_lines,
            whole=arg_bool(args, "whole", False),
            raw=arg_bool(args, "raw", False),
        )
        self._remember(path)
        self._cursor = result.cursor
        return result.text

    def _more(self, args: Args) -> str:
        cursor = self._cursor
        if cursor is None:
            raise ToolError("no previous output to continue")
        count = arg_int(args, "count", DEFAULT_LINES, 1, INT_LIMIT)
        data = self.workspace.read(cursor.path)
        result = read_chunk(
            cursor.path, data, start=cursor.next_line, max_lines=count, whole=False, raw=cursor.raw
        )
        self._cursor = result.cursor
        return result.text

    def _write(self, args: Args) -> str:
        path = _path_arg(args, "write")
        content = required_text(args, "content", "write").encode("utf-8")
        self._check_unchanged(path)
        self.workspace.write(path, content)
        self._remember(path)
        return f"Wrote {len(content)} bytes to {path}\n"

    def edit_selector_error(self, path: str, old: str) -> str | None:
        """The pre-flight of a streaming edit: why its old text selects no span, or None."""
        try:
            select_span(self.workspace.read(path), old.encode("utf-8"), upto=self.edit_upto)
        except ToolError as exc:
            return str(exc)
        return None

    def _edit(self, args: Args) -> str:
        path = _path_arg(args, "edit")
        old = arg_text(args, "old")
        if not old:
            raise ToolError("edit requires non-empty old text")
        new = arg_text(args, "new")
        if new is None:
            raise ToolError("edit requires new text")
        data = self.workspace.read(path)
        self._check_unchanged(path)
        span = select_span(data, old.encode("utf-8"), upto=self.edit_upto)
        updated = apply_edit(data, span, new.encode("utf-8"))
        self.workspace.write(path, updated)
        self._remember(path)
        return edit_report(path, data, span, updated)

    def _search(self, args: Args) -> str:
        query = required_text(args, "query", "search")
        if not query:
            raise ToolError("search requires query")
        q = SearchQuery(
            query=query,
            regex=(arg_text(args, "mode") or "").strip().lower() == "regex",
            glob=arg_text(args, "glob") or None,
            context=arg_int(args, "context", 0, 0, 5),
            max_results=arg_int(args, "max_results", 50, 1, 500),
            case_sensitive=arg_bool(args, "case_sensitive", True),
        )
        report = SearchReport(q)
        for path in self.workspace.walk(_path_arg(args, "search", "."), SEARCH_DEPTH):
            if report.full():
                break
            if not glob_allows(q.glob, path):
                continue
            try:
                data = self.workspace.read(path)
            except ToolError:
                continue  # unreadable or over 16 MiB: skipped
            report.add_file(path, data)
        return report.text()

    def _visit(self, args: Args, cancel: CancelCheck) -> str:
        url = required_text(args, "url", "visit_page").strip()
        if not url.startswith(("http://", "https://")):
            raise ToolError(f"visit_page needs an http:// or https:// address, not {url!r}")
        if self.browser is None:
            raise ToolError("visit_page is not available in this agent")
        text = self.browser.visit(url, cancel)
        if len(text) > PAGE_LIMIT:
            cut = len(text) - PAGE_LIMIT
            text = text[:PAGE_LIMIT] + f"\n[page truncated: {cut} more characters]\n"
        return text if text.endswith("\n") else text + "\n"

    def _bash(self, name: str, args: Args, cancel: CancelCheck) -> str:
        shell = self.jobs.shell
        refresh = arg_int(args, "refresh_sec", DEFAULT_REFRESH, 1, 3600)
        if name == "bash":
            command = required_text(args, "command", "bash")
            timeout = arg_int(args, "timeout_sec", DEFAULT_TIMEOUT, 1, 86400)
            snap = shell.start(command, timeout)
            return self.jobs.observe(shell.wait(snap.job, refresh, cancel))
        job = arg_int(args, "job", 0, -INT_LIMIT, INT_LIMIT)
        pid = arg_int(args, "pid", 0, -INT_LIMIT, INT_LIMIT)
        found = shell.find(job, pid)
        if found is None:
            raise ToolError(f"bash job not found: job={job} pid={pid}")
        if name == "bash_stop":
            return self.jobs.observe(shell.stop(found, refresh))
        return self.jobs.observe(shell.snapshot(found))
