"""`ds4 server` as a user starts it: a subprocess on a free loopback port."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

DS4 = [sys.executable, "-m", "ds4"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    proc: subprocess.Popen[str]
    url: str

    def stop(self, timeout: float = 60) -> tuple[int, str]:
        """SIGTERM, then (exit status, everything it wrote on stderr)."""
        if self.proc.poll() is None:
            self.proc.terminate()
        _, stderr = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, stderr


def scripted_args(tmp: Path, outputs: Sequence[str]) -> list[str]:
    script = tmp / f"script-{time.monotonic_ns()}.json"
    script.write_text(json.dumps(list(outputs)), encoding="utf-8")
    return ["--backend", "scripted", "--script", str(script)]


@contextmanager
def server_process(
    args: Sequence[str], timeout: float = 60, host: str = "127.0.0.1"
) -> Iterator[ServerProcess]:
    """`ds4 server ARGS --port P` (ARGS bind it to `host`), once GET /health answers;
    stopped on exit."""
    port = free_port()
    proc = subprocess.Popen(
        [*DS4, "server", *args, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    running = ServerProcess(proc, f"http://{host}:{port}")
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {running.stop()[1]}")
            try:
                if httpx.get(running.url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.05)
        yield running
    finally:
        if proc.poll() is None:
            running.stop()
