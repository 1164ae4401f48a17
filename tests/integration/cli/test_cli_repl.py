"""`ds4 cli` with no prompt on a terminal: the interactive REPL, driven through a pty."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

WAIT_S = 60.0  # generous bound for slow machines; not a timing assertion


class Terminal:
    """A child process on a pseudo-terminal, with expect-style reading."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
        )
        os.close(slave)
        self.seen = ""

    def expect(self, text: str) -> str:
        deadline = time.monotonic() + WAIT_S
        while text not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0 or (self.proc.poll() is not None and not self._ready(0)):
                raise AssertionError(f"never saw {text!r}; output so far:\n{self.seen[-3000:]}")
            if self._ready(min(left, 0.5)):
                with contextlib.suppress(OSError):
                    self.seen += os.read(self.master, 65536).decode("utf-8", "replace")
        start = self.seen.index(text)
        consumed, self.seen = self.seen[: start + len(text)], self.seen[start + len(text) :]
        return consumed

    def _ready(self, timeout: float) -> bool:
        return bool(select.select([self.master], [], [], timeout)[0])

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self) -> int:
        try:
            return self.proc.wait(timeout=WAIT_S)
        finally:
            os.close(self.master)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("repl") / "tiny.gguf"
    made = subprocess.run(
        [sys.executable, "-m", "ds4", "gguf", "tiny", "--quant", "f32", "--preset",
         "tiny-2layer", "--out", str(out), "--quiet"], capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    return out


def test_repl_turns_commands_interrupt_and_quit(tiny_model: Path, tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
    note = tmp_path / "note.txt"
    note.write_text("Read this note.", encoding="utf-8")
    term = Terminal(
        [sys.executable, "-m", "ds4", "cli", "-m", str(tiny_model), "-c", "2048",
         "--nothink", "--temp", "0", "-n", "6"], env,
    )  # fmt: skip
    term.expect("ds4>")
    # The prompt is redrawn while typing, so wait for each command's own output.
    term.send("/help\r")
    term.expect("Ctrl+C stops the current generation")
    term.send("/think-max\r")
    term.expect("Thinking mode: high (ctx below")  # falls back at ctx 2048
    term.send("/nothink\r")
    term.expect("Thinking mode: none")
    term.send("Hello there\r")
    term.expect("t/s")  # a turn ran and printed its speed summary
    term.send(f"/read {note}\r")
    term.expect("t/s")
    term.send("/bogus\r")
    term.expect("unknown command: /bogus")
    term.send("/ctx 4096\r")
    term.expect("Thinking mode: none")
    term.send("/quit\r")
    assert term.close() == 0


def test_ctrl_c_stops_generation_and_returns_to_the_prompt(
    tiny_model: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
    term = Terminal(
        [sys.executable, "-m", "ds4", "cli", "-m", str(tiny_model), "-c", "4096",
         "--nothink", "--temp", "0", "-n", "3000"], env,
    )  # fmt: skip
    term.expect("ds4>")
    term.send("Tell me a long story\r")
    time.sleep(2.0)  # let generation start; then interrupt it like a user would
    os.killpg(term.proc.pid, signal.SIGINT)
    term.expect("ds4>")  # back at the prompt, not exited
    assert term.proc.poll() is None
    term.send("/quit\r")
    assert term.close() == 0
