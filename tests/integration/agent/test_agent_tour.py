"""examples/agent/tour.json, the scripted-backend tour of every tool (docs/agent.md
"A tour on the scripted backend"): run as the docs print it, with --yes it lists,
writes, reads in two chunks, edits, searches and runs and stops commands; without
--yes every tool that asks is refused and nothing is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TOUR = REPO / "examples" / "agent" / "tour.json"
TOOLS = ("list", "write", "read", "more", "edit", "search", "bash", "bash_status", "bash_stop")


def _tour(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), DS4_AGENT_HOME=str(tmp_path / "home"))
    argv = [sys.executable, "-m", "ds4", "agent", "--backend", "scripted", "--script", str(TOUR)]
    return subprocess.run(
        [*argv, "--no-web", "--non-interactive", *flags, "-p", "show me every tool"],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_tour_calls_every_tool_but_visit_page() -> None:
    calls = [o.split('invoke name="')[1].split('"')[0] for o in json.loads(TOUR.read_text())[:-1]]
    assert sorted(set(calls)) == sorted(TOOLS)


def test_with_yes_the_tour_runs_every_tool(tmp_path: Path) -> None:
    done = _tour(tmp_path, "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Tour done:")
    assert (tmp_path / "work" / "hello.txt").read_text() == "ciao dal lake\nhello from the lake\n"
    log = done.stderr
    assert "Wrote 34 bytes to hello.txt" in log
    assert "hello.txt: lines 1-1 of 2; continue_offset=2" in log
    assert "hello.txt: lines 2-2 of 2" in log
    assert "Edited hello.txt using old/new replacement" in log
    assert "2 matches shown" in log
    assert "<output>\n  2 hello.txt\n  </output>" in log
    assert "status=running" in log and "exit_status=143" in log  # the slow job, stopped


def test_without_yes_every_change_is_refused(tmp_path: Path) -> None:
    done = _tour(tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "work" / "hello.txt").exists()
    log = done.stderr
    assert "Tool error: user denied write" in log
    assert log.count("Tool error: user denied bash") == 2
    assert "[tool call stopped: edit old selector failed]" in log  # no file to edit


def test_in_a_terminal_each_change_asks_first(tmp_path: Path) -> None:
    from tests.integration.agent.tmux_driver import Tmux, need_tmux

    need_tmux()
    term = Tmux(tmp_path / "tmux.sock")
    try:
        work = tmp_path / "work"
        work.mkdir()
        env = {"PYTHONPATH": str(REPO / "src"), "DS4_AGENT_HOME": str(tmp_path / "home"),
               "TERM": "xterm-256color"}  # fmt: skip
        argv = [sys.executable, "-m", "ds4", "agent", "--backend", "scripted"]
        term.start([*argv, "--script", str(TOUR), "--no-web"], cwd=work, env=env)
        term.wait_for(r"\| idle \|", timeout=90)
        term.type("show me every tool")
        term.keys("Enter")
        term.wait_for(r"Write 34 bytes to hello\.txt\? \(y/n\) \[auto-no in \d+s\]")
        assert not (work / "hello.txt").exists()  # nothing is written before the yes
        term.keys("y")
        for question in (r"Edit hello\.txt\?", r"Run `wc -l hello\.txt`\?", r"Run `sleep 30"):
            term.wait_for(question + r".*\(y/n\) \[auto-no")
            term.keys("y")
        term.wait_for(r"Tour done:")
        assert (work / "hello.txt").read_text() == "ciao dal lake\nhello from the lake\n"
        term.keys("C-d")
        term.wait_for(r"Save current session\? \(y/n\)")
        term.keys("n")
        term.wait_for(r"EXITED 0")
    finally:
        term.close()
