"""Drive a real terminal program inside tmux: type, press keys, read the screen."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest


def need_tmux() -> str:
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux is not installed (apt-get install tmux)")
    return tmux


class Tmux:
    def __init__(self, socket: Path, width: int = 120, height: int = 40) -> None:
        self.tmux = need_tmux()
        self._base = str(socket)
        self.socket = self._base
        self._starts = 0
        self.width, self.height = width, height

    def _run(self, *args: str) -> str:
        done = subprocess.run(
            [self.tmux, "-S", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        return done.stdout

    def start(self, argv: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        """Run argv in a fresh pane; the pane stays open after it exits, showing
        `EXITED <status>`."""
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        line = (
            f"cd {shlex.quote(str(cwd))} && env {exports} {shlex.join(argv)}; "
            "echo EXITED $?; sleep 600"
        )
        self.close()
        self._starts += 1
        self.socket = f"{self._base}.{self._starts}"  # a fresh server for every start
        self._run(
            "new-session", "-d", "-x", str(self.width), "-y", str(self.height), "sh", "-c", line
        )

    def type(self, text: str) -> None:
        self._run("send-keys", "-l", text)

    def keys(self, *keys: str) -> None:
        self._run("send-keys", *keys)

    def screen(self) -> str:
        return self._run("capture-pane", "-p")

    def wait_for(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        """The first match of `pattern` on the screen, polling until `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            found = re.search(pattern, screen)
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} did not appear; the screen:\n{screen}")
            time.sleep(0.2)

    def close(self) -> None:
        self._run("kill-server")
