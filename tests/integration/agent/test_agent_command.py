"""`ds4 agent --non-interactive` as a script would run it, the trace file, and flag
errors (one line, exit 2) and start-up errors (exit 1), never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ds4.apps.cli import main

REPO = Path(__file__).resolve().parents[3]
WRITE = (
    "Writing.</think>\n\n<｜DSML｜tool_calls>\n"
    '<｜DSML｜invoke name="write">\n'
    '<｜DSML｜parameter name="path" string="true">out/hello.txt</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="content" string="true">hi\n</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
)
ANSWER = "Done.</think>The file is written."


def _run(tmp_path: Path, *flags: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([WRITE, ANSWER], ensure_ascii=False), encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), DS4_AGENT_HOME=str(tmp_path / "home"))
    argv = [sys.executable, "-m", "ds4", "agent", "--backend", "scripted", "--script", str(script)]
    return subprocess.run(
        [*argv, "--chdir", str(work), "-c", "16384", *flags],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_a_task_runs_to_its_answer_with_yes(tmp_path: Path) -> None:
    trace = tmp_path / "trace.log"
    done = _run(tmp_path, "--non-interactive", "--yes", "-p", "write hello", "--trace", str(trace))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The file is written.\n"
    assert (tmp_path / "work/out/hello.txt").read_text() == "hi\n"
    assert "--yes: every write, edit, command and page visit runs without asking" in done.stderr
    assert "🛠️ write path=out/hello.txt (3 bytes)" in done.stderr
    assert "\x1b[" not in done.stderr  # no colour without a terminal
    records = trace.read_text(encoding="utf-8")
    assert "agent worker start ctx=16384 backend=scripted" in records
    assert 'user="write hello"' in records
    assert "dsml done calls=1" in records
    assert records.splitlines()[0][:4].isdigit() and records.splitlines()[0][19] == "."


def test_without_yes_every_confirmation_is_a_no_and_the_task_still_ends(tmp_path: Path) -> None:
    done = _run(tmp_path, "--non-interactive", stdin="write hello from stdin")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The file is written.\n"  # (the scripted model does not notice)
    assert not (tmp_path / "work/out").exists()
    assert "Tool error: user denied write" in done.stderr
    assert "* write hello from stdin" in done.stderr


def test_errors_are_one_line(tmp_path: Path) -> None:
    no_tty = _run(tmp_path, "-p", "x")
    assert no_tty.returncode == 2  # a usage error
    assert no_tty.stderr.strip().endswith(
        "ds4 agent needs a terminal; without one use --non-interactive -p TEXT"
    )
    small = _run(tmp_path, "--non-interactive", "-p", "x", "-c", "64")
    assert small.returncode == 1
    assert "does not fit --ctx 64" in small.stderr and "Traceback" not in small.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["agent", "--backend", "scripted"], "--backend scripted needs --script FILE"),
        (["agent", "--ctx", "1"], "argument -c/--ctx: 1 is not in 2..1048576"),
        (["agent", "--confirm-timeout", "0"], "argument --confirm-timeout: 0 is not in 1..3600"),
        (
            ["agent", "--chdir", "/no/such/dir"],
            "argument --chdir/--cwd: /no/such/dir does not exist",
        ),
        (["agent", "-p", "a", "--prompt-file", __file__], "not allowed with argument -p/--prompt"),
    ],
)
def test_flag_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_help_states_every_flag_and_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["agent", "--help"])
    out = capsys.readouterr().out
    for flag in ("--yes", "--edit-upto", "--non-interactive", "--trace", "--chdir", "--no-web",
                 "--backend", "--script", "--prefill-chunk", "--confirm-timeout"):  # fmt: skip
        assert flag in out
    assert "(default: 100000)" in out and "(default: 10.0)" in out
    assert "DS4_AGENT_HOME" in out
