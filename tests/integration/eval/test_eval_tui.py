"""The full-screen view driven in tmux: it starts, shows progress (and pauses on `p`),
leaves the screen for the final table, and exits with the run's status."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.integration.eval.eval_files import OUTPUTS, write_cases, write_script

TMUX = shutil.which("tmux")
WAIT_S = 60.0  # generous bound for a loaded machine; not a timing assertion

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install tmux)")


class Pane:
    def __init__(self, command: str) -> None:
        self.name = f"ds4-eval-{uuid.uuid4().hex[:8]}"
        self.tmux([
            "new-session", "-d", "-s", self.name, "-x", "120", "-y", "30",
            f"{command}; echo EXIT=$?; sleep 120",
        ])  # fmt: skip

    def tmux(self, args: list[str]) -> str:
        assert TMUX is not None
        done = subprocess.run([TMUX, *args], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def screen(self) -> str:
        return self.tmux(["capture-pane", "-p", "-t", self.name])

    def wait(self, check: Callable[[str], bool], what: str) -> str:
        deadline = time.monotonic() + WAIT_S
        while True:
            text = self.screen()
            if check(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"never saw {what}; the screen:\n{text}")
            time.sleep(0.05)

    def keys(self, *keys: str) -> None:
        self.tmux(["send-keys", "-t", self.name, *keys])

    def close(self) -> None:
        subprocess.run([TMUX or "tmux", "kill-session", "-t", self.name], capture_output=True)


def test_full_screen_run(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl")
    script = write_script(tmp_path / "script.json", OUTPUTS)
    src = Path(__file__).resolve().parents[3] / "src"
    env = f"PYTHONPATH={src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    command = (
        f"cd {tmp_path} && env {env} {sys.executable} -m ds4 eval --backend scripted "
        f"--script {script} --cases {cases} --script-token-delay 0.05 --pause-ms 100 "
        "-n 200 --hard-limit-reply-budget 20 --soft-limit-reply-budget 40"
    )
    pane = Pane(command)
    try:
        start = pane.wait(lambda s: "ds4-eval (p)ause (q)uit" in s, "the full screen")
        assert re.search(r"score \d/5  failed \d", start)
        assert ">01 " in start and "T: Pick the second." in start  # the case list
        running = pane.wait(lambda s: "THINK" in s or "ANS" in s, "a case generating")
        assert "Speed" in running and "T/" in running
        pane.wait(lambda s: "PASS" in s and "B/B" in s, "the first result in the list")
        pane.keys("p")
        paused = pane.wait(lambda s: "PAUSED" in s, "the pause marker")
        assert "(q)uit" in paused
        pane.keys("p")
        pane.wait(lambda s: "PAUSED" not in s and "score 3/5" in s, "progress after resuming")
        final = pane.wait(lambda s: "EXIT=" in s, "the process to exit")
        assert "ds4-eval: 4/5 passed, 1 failed" in final
        assert "#   state      prompt      gen    total given    correct  test" in final
        assert "  5 FAILED" in final
        assert "EXIT=1" in final  # a failed case
        assert "(p)ause" not in final  # the full screen is gone
    finally:
        pane.close()
