"""One access-log line per HTTP request, and its count in /metrics
(docs/adr/0046-observability.md).

The outermost ASGI layer: it sees every request, also those the guard refuses, and
the status of the response head that went out. Generation routes fill in the
record it leaves in the scope (tokens, cache source, finish, token times). uvicorn's
own access log is off (serve.py), so this is the only line a request gets.

The line goes to the `ds4.access` logger at INFO with the record's fields attached as
`fields`; the server's logging setup (apps/server_logging.py) renders them as text or
JSON.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from ds4.adapters.http.guard import ASGIApp, Message, Receive, Scope, Send
from ds4.adapters.http.metrics import CLIENT_GONE, RequestRecord, ServerMetrics, detached_record

log = logging.getLogger("ds4.access")

RECORD_KEY = "ds4.request"  # where the record sits in the ASGI scope


def request_record(scope: Scope) -> RequestRecord:
    """The record the access middleware left for this request (a detached one, logged
    nowhere, when the route runs without the middleware)."""
    record = scope.get(RECORD_KEY)
    if isinstance(record, RequestRecord):
        return record
    return detached_record(str(scope.get("method", "")), str(scope.get("path", "")))


def route_label(path: str, labels: Mapping[str, str]) -> str:
    """The route's label: an exact path of `labels`, else a key ending in "/" that
    prefixes it, else "other" (so unknown paths never become label values)."""
    exact = labels.get(path.rstrip("/") or "/")
    if exact is not None:
        return exact
    for prefix, label in labels.items():
        if prefix.endswith("/") and path.startswith(prefix):
            return label
    return "other"


def _client(scope: Scope) -> str | None:
    client = scope.get("client")
    if not client:
        return None
    host, port = client[0], client[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def observed(
    app: ASGIApp,
    metrics: ServerMetrics,
    labels: Mapping[str, str],
    clock: Callable[[], float] = time.monotonic,
) -> ASGIApp:
    async def observe(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        record = RequestRecord(
            method=str(scope.get("method", "")),
            path=path,
            api=route_label(path, labels),
            started=clock(),
            client=_client(scope),
            clock=clock,
            timing=metrics,
        )
        scope[RECORD_KEY] = record

        async def send_observed(message: Message) -> None:
            if message["type"] == "http.response.start" and record.status is None:
                record.status = int(message["status"])
            await send(message)

        try:
            await app(scope, receive, send_observed)
        except Exception:
            if record.status is None:
                record.status = 500  # what uvicorn answers for an exception
            raise
        finally:
            if record.status is None:
                record.status = CLIENT_GONE  # the client left before any answer
            fields = record.fields(clock() - record.started)
            metrics.request_done(record)  # first: a reader of the line sees it counted
            log.info("access", extra={"fields": fields})

    return observe
