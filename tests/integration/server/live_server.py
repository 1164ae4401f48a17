"""A real ds4 server (uvicorn, scripted backend) on a free loopback port, in-thread, with
the production uvicorn settings (serve.uvicorn_config)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from ds4.adapters.http.inference_worker import JobQueue
from ds4.adapters.http.serve import Ds4Server, uvicorn_config
from ds4.apps.options import ServerOptions
from ds4.apps.server_bootstrap import BuiltServer, bind_listener, bootstrap_server

D = "｜DSML｜"


def tool_call_dsml(name: str, **params: str) -> str:
    body = "".join(
        f'<{D}parameter name="{k}" string="true">{v}</{D}parameter>\n' for k, v in params.items()
    )
    return f'\n\n<{D}tool_calls>\n<{D}invoke name="{name}">\n{body}</{D}invoke>\n</{D}tool_calls>'


@dataclass
class LiveServer:
    url: str
    built: BuiltServer

    @property
    def base(self) -> str:
        return self.url + "/v1"


@contextmanager
def live_server(
    tmp: Path, script: Sequence[str], trace: TextIO | None = None, **overrides: object
) -> Iterator[LiveServer]:
    script_file = tmp / f"script-{time.monotonic_ns()}.json"
    script_file.write_text(json.dumps(list(script)), encoding="utf-8")
    options = ServerOptions(model=None, backend="scripted", script=str(script_file), ctx=4096)
    options = replace(options, **overrides)  # type: ignore[arg-type]
    built = bootstrap_server(options, trace)
    listener = bind_listener("127.0.0.1", 0, options.max_connections)
    port = int(listener.getsockname()[1])
    config = uvicorn_config(built.app, built.state.config, log_level="error")
    server = Ds4Server(config, built.state.inference)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("server did not start")
        time.sleep(0.02)
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", built)
    finally:
        built.state.inference.begin_stop()
        server.should_exit = True
        thread.join(15)
        listener.close()


def wait_until_queued(inference: JobQueue, jobs: int, timeout: float = 30.0) -> None:
    """Poll the server's count of accepted jobs (no guessing how long real work takes)."""
    deadline = time.monotonic() + timeout
    while inference.submitted < jobs:
        assert time.monotonic() < deadline, f"job {jobs} was never queued"
        time.sleep(0.005)
