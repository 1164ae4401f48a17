"""Issue 14 item 2: shutdown keeps the final KV save, startup failures are one line.

The lifespan test drives the real ASGI app (Litestar's on_shutdown hook) while the
worker is held inside a job, as when a job outlives uvicorn's graceful period: the
hook must wait for the worker to cancel that job and save on its own thread. The
process tests run `ds4 server` as a user does.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import threading
from pathlib import Path

import httpx
import pytest
from tests.integration.server.server_process import (
    DS4,
    free_port,
    scripted_args,
    server_process,
)
from tests.unit.serving.fake_server import FakeServer, fake_server

from ds4.adapters.http.guard import Message
from ds4.adapters.http.inference_worker import Job, JobOutput
from ds4.domain.kvcache.kv_file import SaveReason

WAIT = 30.0


class HeldJob:
    """From its fifth output on (a few tokens into the answer), deliveries block the
    worker thread until `release` is set."""

    def __init__(self) -> None:
        self.outputs = 0
        self.running = threading.Event()
        self.release = threading.Event()

    def deliver(self, _output: JobOutput) -> None:
        self.outputs += 1
        if self.outputs >= 5:
            self.running.set()
            assert self.release.wait(WAIT)


async def lifespan_with_busy_worker(sessions: int) -> tuple[list[Message], bool, FakeServer]:
    server = fake_server({"first": "One two three four five six."}, sessions=sessions)
    state = server.built.state
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    app = asyncio.ensure_future(server.built.app(scope, inbox.get, send))
    await inbox.put({"type": "lifespan.startup"})
    while not sent:
        await asyncio.sleep(0.01)
    held = HeldJob()
    state.inference.submit(Job(server.chat([{"role": "user", "content": "first"}]), held.deliver))
    assert await asyncio.to_thread(held.running.wait, WAIT)
    await inbox.put({"type": "lifespan.shutdown"})
    await asyncio.sleep(0.3)
    waited = len(sent) == 1  # no shutdown.complete while the worker is busy
    held.release.set()
    await asyncio.wait_for(app, WAIT)
    return sent, waited, server


@pytest.mark.parametrize("sessions", [1, 2])  # one worker, or a pool of slots
def test_shutdown_hook_waits_for_a_busy_worker_and_keeps_the_final_save(sessions: int) -> None:
    sent, waited, server = asyncio.run(lifespan_with_busy_worker(sessions))
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert waited
    assert SaveReason.SHUTDOWN in [reason for reason, _ in server.saved()]


def test_sigterm_mid_stream_saves_the_session_and_exits_cleanly(tmp_path: Path) -> None:
    kv = tmp_path / "kv"
    args = [
        *scripted_args(tmp_path, ["</think>" + "word " * 400]),
        "--script-token-delay", "0.02",
        "--kv-disk-dir", str(kv),
        "--kv-cache-min-tokens", "8",
    ]  # fmt: skip
    with server_process(args) as server:
        body = {"messages": [{"role": "user", "content": "talk " * 20}], "stream": True}
        with httpx.stream(
            "POST", server.url + "/v1/chat/completions", json=body, timeout=30
        ) as response:
            lines = response.iter_lines()
            for line in lines:
                if '"content"' in line:
                    break  # generating: now stop the server under it
            server.proc.send_signal(signal.SIGTERM)
            rest = list(lines)  # the stream ends (cancelled), it does not hang
        assert "data: [DONE]" in rest
        finish = [line for line in rest if '"finish_reason":"' in line]
        assert len(finish) == 1 and '"finish_reason":"length"' in finish[0]  # ADR 0047
        code, stderr = server.stop()
    assert code in (0, -signal.SIGTERM), stderr
    assert "Traceback" not in stderr
    assert "reason=shutdown" in stderr
    assert list(kv.glob("*.kv"))


def run_server(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DS4, "server", *scripted_args(tmp, ["ok"]), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_port_in_use_is_one_line_and_exit_1(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        result = run_server(tmp_path, "--port", str(port))
    assert result.returncode == 1
    expected = f"ds4: error: cannot listen on 127.0.0.1:{port}: address already in use\n"
    assert result.stderr == expected


def test_unresolvable_host_is_one_line_and_exit_1(tmp_path: Path) -> None:
    result = run_server(tmp_path, "--host", "no-such-host.invalid", "--port", str(free_port()))
    assert result.returncode == 1
    assert result.stderr.startswith("ds4: error: cannot listen on no-such-host.invalid:")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
