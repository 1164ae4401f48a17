"""Run the ASGI app under uvicorn on an already bound socket until a signal.

The first SIGINT/SIGTERM stops the job queue (running jobs end at their next chunk or
token) and starts uvicorn's graceful shutdown; the lifespan hook then waits for the
worker's shutdown save. A second SIGINT gives up on that wait.
"""

from __future__ import annotations

import asyncio
import socket
from types import FrameType

import uvicorn

from ds4.adapters.http.accept_errors import quiet_accept_errors
from ds4.adapters.http.bounded_protocol import bounded_protocol
from ds4.adapters.http.guard import ASGIApp
from ds4.adapters.http.job_queue import JobQueue
from ds4.adapters.http.server_state import MAX_HEADER_BYTES, HttpConfig

GRACEFUL_SECONDS = 10  # open requests get this long to finish before they are cancelled


def uvicorn_config(app: ASGIApp, limits: HttpConfig, log_level: str = "warning") -> uvicorn.Config:
    """The connection limits of ADR 0044: head and idle timeouts, the connection cap
    (bounded_protocol), 64 KiB of headers. uvicorn's access log is off and its logging
    setup skipped: access_log.py writes the one line per request, and uvicorn's own
    lines go through the server's handler (docs/adr/0046-observability.md)."""
    return uvicorn.Config(
        app,
        http=bounded_protocol(limits.header_timeout, limits.max_connections),
        log_level=log_level,
        access_log=False,
        log_config=None,
        lifespan="on",
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        timeout_keep_alive=limits.idle_timeout,  # type: ignore[arg-type]  # int in its hints; any float works
        timeout_graceful_shutdown=GRACEFUL_SECONDS,
    )


class Ds4Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, inference: JobQueue) -> None:
        super().__init__(config)
        self.inference = inference

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        quiet_accept_errors(asyncio.get_running_loop())
        await super().startup(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit:
            self.inference.abandon()  # a second signal: leave without the save
        else:
            self.inference.begin_stop()  # running jobs end at their next token
        super().handle_exit(sig, frame)


def serve(app: ASGIApp, inference: JobQueue, limits: HttpConfig, listener: socket.socket) -> None:
    Ds4Server(uvicorn_config(app, limits), inference).run(sockets=[listener])
