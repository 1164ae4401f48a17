"""Run the ASGI app under uvicorn until a signal; the signal first stops the job queue."""

from __future__ import annotations

import uvicorn

from ds4.adapters.http.guard import ASGIApp
from ds4.adapters.http.job_queue import JobQueue
from ds4.adapters.http.server_state import MAX_HEADER_BYTES


def serve(app: ASGIApp, inference: JobQueue, host: str, port: int) -> None:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        timeout_graceful_shutdown=10,
    )

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: object) -> None:
            inference.begin_stop()  # running jobs end at their next token
            super().handle_exit(sig, frame)  # type: ignore[arg-type]

    Server(config).run()
