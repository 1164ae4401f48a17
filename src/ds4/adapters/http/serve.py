"""Run the ASGI app under uvicorn on an already bound socket until a signal; and the
socket side around it: the listening socket, the open-file limit, accept errors and
the bounded h11 protocol (request-head deadline, connection cap; ADR 0044).

The first SIGINT/SIGTERM stops the job queue (running jobs end at their next chunk or
token) and starts uvicorn's graceful shutdown; the lifespan hook then waits for the
worker's shutdown save. A second SIGINT gives up on that wait.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import time
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from ds4.adapters.http.guard import ASGIApp
from ds4.adapters.http.inference_worker import JobQueue
from ds4.adapters.http.server_state import MAX_HEADER_BYTES, HttpConfig
from ds4.domain.errors import Ds4Error, ErrorKind, RequestError
from ds4.wire.apis import openai_error_body

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


# ---- the listening socket --------------------------------------------------
# The listening socket, bound before the model loads so that a taken port or a bad
# address is one line and an exit status, not a traceback after minutes of loading.
#
# The socket is bound but not yet listening: connections are refused until uvicorn
# calls listen(), instead of waiting in the backlog while the model loads.


class ListenError(Ds4Error):
    """The server cannot listen on the address it was given (exit 1,
    docs/adr/0044-server-exposure-and-limits.md)."""

    exit_code = 1


def bind_listener(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as error:
        raise ListenError(f"cannot listen on {host}:{port}: {_reason(error)}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as error:
        sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {_reason(error)}") from None
    return sock


def _reason(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return str(error) or type(error).__name__


# ---- the open-file limit ---------------------------------------------------
# Room in the open-file limit for --max-connections (ADR 0044).
#
# Every connection is a file descriptor; so are the model file, KV cache files, the
# trace and the event loop's own. When the soft limit leaves less than the cap plus
# FD_RESERVE, it is raised toward the hard limit; if even that is too low the server
# refuses to start, rather than let accept() fail under load.

FD_RESERVE = 64


def ensure_fd_room(max_connections: int) -> None:
    needed = max_connections + FD_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard == resource.RLIM_INFINITY or hard >= needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        return
    raise Ds4Error(
        f"--max-connections {max_connections} needs {needed} open files, but the limit is "
        f"{hard} (ulimit -n); lower --max-connections or raise the limit"
    )


# ---- rate-limited warnings -------------------------------------------------
# A warning that repeats at most once per interval (a flood of the same event, such
# as accept() failing every second, must not fill the log).


class RateLimitedWarning:
    def __init__(self, logger: logging.Logger, interval_seconds: float = 60.0) -> None:
        self.logger = logger
        self.interval = interval_seconds
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def report(self, key: str, message: str) -> None:
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        self._last[key] = now
        repeats = self._suppressed.pop(key, 0)
        suffix = f" ({repeats} more since the last report)" if repeats else ""
        self.logger.warning("%s%s", message, suffix)


# ---- accept errors ---------------------------------------------------------
# accept() failing for lack of file descriptors: one warning line a minute instead of
# asyncio's traceback every second (it retries the accept itself after a second).

# the message asyncio's selector loop reports (asyncio/selector_events.py)
ACCEPT_OUT_OF_RESOURCE = "socket.accept() out of system resource"

accept_log = RateLimitedWarning(logging.getLogger("ds4.server"))


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == ACCEPT_OUT_OF_RESOURCE:
            error = context.get("exception")
            reason = getattr(error, "strerror", None) or str(error)
            accept_log.report(
                "accept",
                f"accept() failed ({reason}); new connections wait: lower --max-connections "
                "or raise the open-file limit (ulimit -n)",
            )
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


# ---- the bounded protocol --------------------------------------------------
# uvicorn's h11 protocol with a request-head deadline and a connection cap (ADR 0044).
#
# uvicorn bounds the time between requests on a keep-alive connection (its keep-alive
# timeout, our --idle-timeout) but not the time a client takes to send a request head,
# so 300 clients each sending a byte now and then were held forever. Here:
#
# - a connection must deliver a complete request head within --header-timeout of
#   connecting, or of the first byte after a previous response; else it gets 408 and
#   is closed;
# - at most --max-connections are open. A connection beyond the cap closes the one
#   that has waited longest without a request running (idle, or still sending its
#   head); if every connection runs a request, the newcomer gets 503 and is closed.
#   So slow or idle clients can never lock out a client that sends a whole request.

connection_log = RateLimitedWarning(logging.getLogger("ds4.server"))


def _raw_response(status: int, reason: str, body: bytes = b"") -> bytes:
    head = (
        f"HTTP/1.1 {status} {reason}\r\nconnection: close\r\ncontent-length: {len(body)}\r\n"
        + ("content-type: application/json\r\n" if body else "")
        + "\r\n"
    )
    return head.encode("ascii") + body


REQUEST_TIMEOUT = _raw_response(408, "Request Timeout")
BUSY = _raw_response(
    503,
    "Service Unavailable",
    openai_error_body(RequestError("too many open connections", ErrorKind.UNAVAILABLE)),
)


class BoundedH11Protocol(H11Protocol):
    header_timeout: float = 10.0
    max_connections: int = 64

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.waiting_since: float | None = None  # no request running since then
        self.partial_head = False  # bytes of a request head have arrived
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.waiting_since = self.loop.time()
        self._start_head_timer()
        if len(self.connections) > self.max_connections and not self._evict_one():
            connection_log.report(
                "busy", f"{self.max_connections} connections all running requests: 503"
            )
            self._close_with(BUSY)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        self.waiting_since = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.waiting_since is not None:
            self.partial_head = True
            if self._head_timer is None:
                self._start_head_timer()  # the first byte of the next request
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not None and not self.cycle.response_complete:
            self.waiting_since = None  # a whole head arrived: the request runs
            self.partial_head = False
            self._cancel_head_timer()

    def on_response_complete(self) -> None:
        self.waiting_since = self.loop.time()  # set first: the call may start the next request
        self.partial_head = False
        super().on_response_complete()

    def _start_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.waiting_since is not None:
            self.close_waiting()

    def close_waiting(self) -> None:
        """Close a connection without a running request: 408 if a head had begun, else
        silently, as uvicorn closes an idle keep-alive connection."""
        self._close_with(REQUEST_TIMEOUT if self.partial_head else b"")

    def _close_with(self, response: bytes) -> None:
        self.waiting_since = None
        self._cancel_head_timer()
        if not self.transport.is_closing():
            if response:
                self.transport.write(response)
            self.transport.close()

    def _evict_one(self) -> bool:
        """Close the connection that has waited longest without a running request."""
        waiting = [
            c
            for c in self.connections
            if isinstance(c, BoundedH11Protocol)
            and c is not self
            and c.waiting_since is not None
            and not c.transport.is_closing()
        ]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: c.waiting_since or 0.0)
        connection_log.report(
            "evict", f"{self.max_connections} connections open: closing the longest idle"
        )
        oldest.close_waiting()
        return True


def bounded_protocol(header_timeout: float, max_connections: int) -> type[BoundedH11Protocol]:
    """The protocol class uvicorn instantiates per connection, with these limits."""
    return type(
        "BoundedH11Protocol",
        (BoundedH11Protocol,),
        {"header_timeout": header_timeout, "max_connections": max_connections},
    )
