"""uvicorn's h11 protocol with a request-head deadline and a connection cap (ADR 0044).

uvicorn bounds the time between requests on a keep-alive connection (its keep-alive
timeout, our --idle-timeout) but not the time a client takes to send a request head,
so 300 clients each sending a byte now and then were held forever. Here:

- a connection must deliver a complete request head within --header-timeout of
  connecting, or of the first byte after a previous response; else it gets 408 and
  is closed;
- at most --max-connections are open. A connection beyond the cap closes the one
  that has waited longest without a request running (idle, or still sending its
  head); if every connection runs a request, the newcomer gets 503 and is closed.
  So slow or idle clients can never lock out a client that sends a whole request.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from ds4.adapters.http.rate_limited_log import RateLimitedWarning
from ds4.domain.errors import ErrorKind, RequestError
from ds4.wire.apis import openai_error_body

log = RateLimitedWarning(logging.getLogger("ds4.server"))


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
            log.report("busy", f"{self.max_connections} connections all running requests: 503")
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
        log.report("evict", f"{self.max_connections} connections open: closing the longest idle")
        oldest.close_waiting()
        return True


def bounded_protocol(header_timeout: float, max_connections: int) -> type[BoundedH11Protocol]:
    """The protocol class uvicorn instantiates per connection, with these limits."""
    return type(
        "BoundedH11Protocol",
        (BoundedH11Protocol,),
        {"header_timeout": header_timeout, "max_connections": max_connections},
    )
