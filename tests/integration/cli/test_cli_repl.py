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

from ds4.apps import cli_repl

WAIT_S = 60.0  # generous bound for slow machines; not a timing assertion

# `ds4 cli` with one test hook (in this child only), talking through the pipe fd given as
# its first argument: once the first generated token is shown it writes "!" and holds the
# turn until SIGINT arrives, so a Ctrl+C sent on that byte provably lands mid-generation;
# when the turn ends it writes the finish reason and a newline.
HELD_CLI = """
import os, select, signal, sys
from ds4.apps import cli_repl
from ds4.apps.cli import main
from ds4.domain.generation.events import Finished, ReasoningDelta, TextDelta

ready = int(sys.argv.pop(1))


class HoldAfterFirstToken(cli_repl.EventPrinter):
    held = False

    def show(self, event):
        super().show(event)
        if isinstance(event, Finished):
            os.write(ready, event.finish.encode() + b"\\n")
        elif isinstance(event, (TextDelta, ReasoningDelta)) and not HoldAfterFirstToken.held:
            HoldAfterFirstToken.held = True
            woken, wake = os.pipe()
            os.set_blocking(wake, False)
            previous = signal.set_wakeup_fd(wake)  # a byte on `woken` once SIGINT arrived
            os.write(ready, b"!")
            select.select([woken], [], [], 60)  # the CLI's own SIGINT handler runs meanwhile
            signal.set_wakeup_fd(previous)
            os.close(woken)
            os.close(wake)


cli_repl.EventPrinter = HoldAfterFirstToken
raise SystemExit(main(sys.argv[1:]))
"""


class Terminal:
    """A child process on a pseudo-terminal, with expect-style reading."""

    def __init__(
        self, args: list[str], env: dict[str, str], pass_fds: tuple[int, ...] = ()
    ) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
            pass_fds=pass_fds,
        )  # fmt: skip
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

    def wait_for_byte(self, fd: int) -> bytes:
        """One byte from fd (b"" at EOF), reading the terminal meanwhile so it never blocks."""
        deadline = time.monotonic() + WAIT_S
        while (left := deadline - time.monotonic()) > 0:
            readable = select.select([self.master, fd], [], [], left)[0]
            if self.master in readable:
                with contextlib.suppress(OSError):
                    self.seen += os.read(self.master, 65536).decode("utf-8", "replace")
            if fd in readable:
                return os.read(fd, 1)
        raise AssertionError(f"nothing on fd {fd}; output so far:\n{self.seen[-3000:]}")

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
    term.send("/ctx 1\r")
    term.expect("/ctx needs a context size in 2..1048576")
    term.send("/ctx 4096\r")
    term.expect("Context: 4096 tokens (a new session; the conversation is kept).")
    term.expect("Thinking mode: none")
    term.send("/quit\r")
    assert term.close() == 0


@pytest.mark.parametrize(
    ("text", "size"),
    [("2", 2), ("4096", 4096), ("1048576", 1048576),
     ("1", None), ("0", None), ("1048577", None), ("-5", None), ("x", None), ("", None)],
)  # fmt: skip
def test_ctx_argument_takes_what_the_ctx_flag_takes(text: str, size: int | None) -> None:
    assert cli_repl.ctx_argument(text) == size


def test_ctrl_c_stops_generation_and_returns_to_the_prompt(
    tiny_model: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
    hook, hook_w = os.pipe()
    try:
        try:
            term = Terminal(
                [sys.executable, "-c", HELD_CLI, str(hook_w), "cli", "-m", str(tiny_model),
                 "-c", "4096", "--nothink", "--temp", "0", "-n", "3000"], env, (hook_w,),
            )  # fmt: skip
        finally:
            os.close(hook_w)  # the child has its own copy: EOF here once it is gone
        term.expect("ds4>")
        term.send("Tell me a long story\r")
        said = term.wait_for_byte(hook)
        assert said == b"!", f"no token was generated; output so far:\n{term.seen[-3000:]}"
        # The turn is held after its first token (of up to 3000): interrupt it like a user.
        os.killpg(term.proc.pid, signal.SIGINT)
        term.expect("t/s")  # the stopped turn still closes with its speed summary
        term.expect("ds4>")  # back at the prompt, not exited
        assert os.read(hook, 64) == b"cancelled\n"  # written before the prompt came back
        assert term.proc.poll() is None
        term.send("/quit\r")
        assert term.close() == 0
    finally:
        os.close(hook)
