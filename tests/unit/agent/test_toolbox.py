"""The tool box: which calls ask, argument errors, read/more, stale-file detection,
search and bash jobs through fake ports."""

from __future__ import annotations

import json

from tests.support.agent_fakes import FakeShell, FakeWorkspace

from ds4.domain.agent.toolbox import PAGE_LIMIT, BashJobs, ToolBox
from ds4.domain.dsml.syntax import ToolCall
from ds4.domain.engine.cancel import CancelCheck
from ds4.ports.agent import JobSnapshot


def _box(files: dict[str, bytes] | None = None) -> tuple[ToolBox, FakeWorkspace, FakeShell]:
    ws, shell = FakeWorkspace(files), FakeShell()
    return ToolBox(ws, shell, None, edit_upto=False), ws, shell


def _run(box: ToolBox, name: str, **args: object) -> str:
    planned = box.plan(ToolCall(name, json.dumps(args)))
    return box.run(planned, lambda: False)


def test_questions_and_argument_errors() -> None:
    box, _, _ = _box()
    assert box.plan(ToolCall("write", '{"path":"a","content":"xy"}')).question == (
        "Write 2 bytes to a?"
    )
    assert box.plan(ToolCall("bash", '{"command":"ls -l"}')).question == "Run `ls -l`?"
    assert box.plan(ToolCall("read", '{"path":"a"}')).question is None
    assert box.plan(ToolCall("list", "{}")).question is None
    assert box.plan(ToolCall("search", '{"query":"q","path":"/etc"}')).question == (
        "Allow search of /etc (outside the working directory)?"
    )
    assert box.plan(ToolCall("read", "{}")).error == "Tool error: read requires path"
    assert box.plan(ToolCall("write", '{"path":"a"}')).error == "Tool error: write requires content"
    assert box.plan(ToolCall("visit_page", '{"url":"http://x"}')).error == (
        "Tool error: unknown tool: visit_page"  # no browser: not offered
    )
    assert (
        box.plan(ToolCall("read", "[")).error == "Tool error: tool arguments are not a JSON object"
    )


def test_read_then_more_continues_and_ends() -> None:
    box, _, _ = _box({"f": b"a\nb\nc\n"})
    assert _run(box, "more") == "Tool error: no previous output to continue"
    assert _run(box, "read", path="f", max_lines="2").startswith(
        "f: lines 1-2 of 3; continue_offset=3"
    )
    assert _run(box, "more", count=5) == "f: lines 3-3 of 3\n3 c\n"
    assert _run(box, "more") == "Tool error: no previous output to continue"
    assert (
        _run(box, "read", path="nope") == "Tool error: cannot read nope: no such file or directory"
    )


def test_a_file_changed_behind_the_agents_back_must_be_read_again() -> None:
    box, ws, _ = _box({"f": b"one\n"})
    _run(box, "read", path="f")
    ws.put("f", b"changed by someone else\n")
    out = _run(box, "edit", path="f", old="one", new="two")
    assert out == "Tool error: f changed since the agent last read or wrote it; read it again first"
    _run(box, "read", path="f")
    assert _run(box, "write", path="f", content="mine\n") == "Wrote 5 bytes to f\n"
    assert ws.files["/work/f"] == b"mine\n"


def test_edit_errors() -> None:
    box, _, _ = _box({"f": b"x\n"})
    assert (
        _run(box, "edit", path="f", old="", new="y")
        == "Tool error: edit requires non-empty old text"
    )
    assert _run(box, "edit", path="f", old="x") == "Tool error: edit requires new text"


def test_search_through_the_workspace() -> None:
    box, _, _ = _box({"src/a.py": b"def f():\n    pass\n", "src/b.txt": b"def\n", ".git/x": b"def"})
    out = _run(box, "search", query="def", glob="*.py")
    assert out == "1 match shown\n\nsrc/a.py\n  1 def f():\n\n"
    assert _run(box, "search", query="") == "Tool error: search requires query"


def test_bash_jobs_status_and_stop() -> None:
    box, _, shell = _box()
    first = _run(box, "bash", command="block", refresh_sec=1)
    assert first.startswith("bash job=1 pid=1001 status=running elapsed_sec=0.5 timeout_sec=3600\n")
    assert first.endswith(
        "\nUse bash_status job=1 to get info before refresh time; use bash_stop job=1 to stop "
        "execution\n"
    )
    later = _run(box, "bash_status", job=1)
    assert "output_path=/tmp/ds4_agent_output_1 (11 bytes, 1 lines)\n<tail -4 " in later
    assert _run(box, "bash_status", job=9) == "Tool error: bash job not found: job=9 pid=0"
    stopped = _run(box, "bash_stop", job=0, pid=1001)
    assert "status=done elapsed_sec=1.0 timed_out=0\nexit_status=143\n" in stopped
    assert "<tail -20 /tmp/ds4_agent_output_1>\nran: block\n</tail>" in stopped
    assert shell.jobs() == []  # a finished job leaves the table after its last report


def test_first_observation_of_a_long_output_shows_its_head() -> None:
    class Chatty(FakeShell):
        def read_output(self, job: int, start: int, length: int) -> bytes:
            return b"".join(b"%d\n" % i for i in range(300))[start : start + length]

    shell = Chatty()
    jobs = BashJobs(shell)
    snap = shell.start("seq 300", 60)
    done = JobSnapshot(1, 1001, False, 2.0, 60, False, 0, "/tmp/o", 1092, 300)
    text = jobs.observe(done)
    assert text.startswith(
        "bash job=1 pid=1001 status=done elapsed_sec=2.0 timed_out=0\nexit_status=0\n"
    )
    assert "output_path=/tmp/o (1092 bytes, 300 lines)\n<head -100 /tmp/o>\n0\n1\n" in text
    assert "\n99\n</head>\n" in text and "\n100\n" not in text
    assert snap.job == 1


class _Pages:
    def __init__(self, text: str) -> None:
        self.text = text
        self.visited: list[str] = []

    def visit(self, url: str, cancel: CancelCheck) -> str:
        self.visited.append(url)
        return self.text

    def close(self) -> None:
        return None


def test_visit_page_asks_checks_the_scheme_and_caps_the_text() -> None:
    pages = _Pages("# Title\n" + "x" * (PAGE_LIMIT + 10))
    box = ToolBox(FakeWorkspace(), FakeShell(), pages, edit_upto=False)
    assert box.plan(ToolCall("visit_page", '{"url":"https://example.org"}')).question == (
        "Open https://example.org?"
    )
    out = box.run(box.plan(ToolCall("visit_page", '{"url":"https://example.org"}')), lambda: False)
    assert out.startswith("# Title\n") and out.endswith("[page truncated: 18 more characters]\n")
    bad = box.run(box.plan(ToolCall("visit_page", '{"url":"file:///etc/passwd"}')), lambda: False)
    assert (
        bad
        == "Tool error: visit_page needs an http:// or https:// address, not 'file:///etc/passwd'"
    )
    assert pages.visited == ["https://example.org"]
