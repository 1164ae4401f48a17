"""`ds4 agent` on the shipped demo model: the write requests of issue 34, in Italian
and in English, end to end.

Not met yet, hence strict xfail: the shipped demo does not copy a path or a text from
its context, and the agent fine-tune of tools/train_demo.py --agent-mix got 0 of 16
held-out calls right (docs/demo-model.md "The agent fine-tune"). When a retrained
model writes these files, this test fails as XPASS: drop the mark then. The requests
are never in the agent training data (tools/demo/agent_dialogues.py HELD_OUT_TEXTS).
The agent's default flags otherwise (thinking mode, visit_page offered, the default
sampling); a seed fixes which sample the test gets. The confirmation the interactive
agent asks first is the agent's (tests/integration/agent/test_agent_terminal.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tools.demo.files import DEMO

REPO = Path(__file__).resolve().parents[3]
REQUESTS = {
    "it": ("Crea il file hello.txt con scritto: ciao dal lago", "ciao dal lago"),
    "en": ("Create the file hello.txt containing: hello from the lake", "hello from the lake"),
}


def _env(home: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO / "src"), DS4_AGENT_HOME=str(home))


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="the demo model does not copy (docs/demo-model.md)")
@pytest.mark.parametrize("lang", sorted(REQUESTS))
def test_the_demo_writes_the_file_it_is_asked_for(tmp_path: Path, lang: str) -> None:
    request, text = REQUESTS[lang]
    work = tmp_path / "work"
    work.mkdir()
    argv = [sys.executable, "-m", "ds4", "agent", "-m", str(DEMO), "--seed", "1"]
    done = subprocess.run(
        [*argv, "--chdir", str(work), "--non-interactive", "--yes", "-p", request],
        capture_output=True, text=True, env=_env(tmp_path / "home"), timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (work / "hello.txt").read_text(encoding="utf-8") == text
    assert done.stdout.strip()  # a short final answer
