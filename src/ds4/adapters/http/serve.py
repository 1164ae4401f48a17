"""Run the ASGI app under uvicorn on an already bound socket until a signal.

The first SIGINT/SIGTERM stops the job queue (running jobs end at their next chunk or
token) and starts uvicorn's graceful shutdown; the lifespan hook then waits for the
worker's shutdown save. A second SIGINT gives up on that wait.
"""

from __future__ import annotations

import socket
from types import FrameType

import uvicorn

from ds4.adapters.http.guard import ASGIApp
from ds4.adapters.http.inference_worker import InferenceWorker
from ds4.adapters.http.server_state import MAX_HEADER_BYTES

GRACEFUL_SECONDS = 10  # open requests get this long to finish before they are cancelled


def uvicorn_config(app: ASGIApp, log_level: str = "warning") -> uvicorn.Config:
    return uvicorn.Config(
        app,
        log_level=log_level,
        lifespan="on",
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        timeout_graceful_shutdown=GRACEFUL_SECONDS,
    )


class Ds4Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, inference: InferenceWorker) -> None:
        super().__init__(config)
        self.inference = inference

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit:
            self.inference.abandon()  # a second signal: leave without the save
        else:
            self.inference.begin_stop()  # running jobs end at their next token
        super().handle_exit(sig, frame)


def serve(app: ASGIApp, inference: InferenceWorker, listener: socket.socket) -> None:
    Ds4Server(uvicorn_config(app), inference).run(sockets=[listener])
