"""ASGI wrapper in front of the routes: Host check, cross-site refusal, API key, CORS,
preflight (the checks themselves: request_checks, ADR 0044).

Refusals are answered in the calling endpoint's own error shape (Anthropic for
/v1/messages, OpenAI elsewhere).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ds4.adapters.http.request_checks import cross_site, host_allowed, key_matches, text_plain_body
from ds4.adapters.http.server_state import HttpConfig
from ds4.domain.errors import ErrorKind, RequestError
from ds4.domain.serving.exchange import Api
from ds4.wire.apis import api_of_path, error_body
from ds4.wire.replies import http_status

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CORS_HEADERS = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
    (b"access-control-allow-headers", b"*"),
]


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def send_json(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_error(
    send: Send, scope: Scope, error: RequestError, api: Api | None = None, *, close: bool = False
) -> None:
    """The error in the shape of `api` (by default the one the path belongs to);
    `close`: the request was not read to its end, so the connection cannot be reused."""
    if api is None:
        api = api_of_path(scope.get("path", ""))
    body = error_body(error, api)
    status = http_status(error.kind)
    await send_json(send, status, body, [(b"connection", b"close")] if close else None)


def _refusal(scope: Scope, config: HttpConfig, expected_key: bytes | None) -> RequestError | None:
    headers = scope.get("headers", ())
    if config.check_host and not host_allowed(headers):
        # DNS rebinding: a page on another origin resolving to 127.0.0.1
        return RequestError("Host header not allowed", ErrorKind.FORBIDDEN)
    if not config.cors and cross_site(headers):
        return RequestError(
            "cross-origin request refused (start the server with --cors)", ErrorKind.FORBIDDEN
        )
    if scope["method"] == "OPTIONS":
        return None
    if not config.cors and text_plain_body(headers):
        return RequestError(
            "Content-Type text/plain is not accepted; send application/json",
            ErrorKind.UNSUPPORTED_MEDIA_TYPE,
        )
    path = scope.get("path", "")
    if expected_key is not None and path != "/health" and not key_matches(headers, expected_key):
        return RequestError("invalid or missing API key", ErrorKind.UNAUTHORIZED)
    return None


def guarded(app: ASGIApp, config: HttpConfig) -> ASGIApp:
    expected_key = config.api_key.encode("utf-8") if config.api_key is not None else None

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if config.cors:
            inner_send = send

            async def send_with_cors(message: Message) -> None:
                if message["type"] == "http.response.start":
                    message["headers"] = [*message.get("headers", []), *CORS_HEADERS]
                await inner_send(message)

            send = send_with_cors
        refusal = _refusal(scope, config, expected_key)
        if refusal is not None:
            await send_error(send, scope, refusal)
            return
        if scope["method"] == "OPTIONS":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    return guard
