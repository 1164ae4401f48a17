"""ASGI wrapper in front of the routes: Host check, API key, CORS, preflight.

Refusals are answered in the calling endpoint's own error shape (Anthropic for
/v1/messages, OpenAI elsewhere). The API key is compared in constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ds4.adapters.http.server_state import LOOPBACK_HOSTS, HttpConfig
from ds4.domain.api.errors import ApiError, error_body

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


def is_anthropic_path(path: str) -> bool:
    return path.rstrip("/").startswith("/v1/messages")


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


async def send_error(send: Send, scope: Scope, error: ApiError) -> None:
    body = error_body(error, anthropic=is_anthropic_path(scope.get("path", "")))
    await send_json(send, error.status, body)


def _host_allowed(host: str | None) -> bool:
    if host is None:
        return False
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return name.lower() in LOOPBACK_HOSTS


def _key_matches(scope: Scope, expected: str) -> bool:
    offered = header(scope, b"x-api-key")
    bearer = header(scope, b"authorization")
    if bearer is not None and bearer[:7].lower() == "bearer ":
        offered = offered or bearer[7:].strip()
    if offered is None:
        return False
    return hmac.compare_digest(offered.encode(), expected.encode())


def guarded(app: ASGIApp, config: HttpConfig) -> ASGIApp:
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
        if config.check_host and not _host_allowed(header(scope, b"host")):
            # DNS rebinding: a page on another origin resolving to 127.0.0.1
            await send_error(send, scope, ApiError(403, "Host header not allowed"))
            return
        if scope["method"] == "OPTIONS":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        path = scope.get("path", "")
        if config.api_key and path != "/health" and not _key_matches(scope, config.api_key):
            await send_error(send, scope, ApiError(401, "invalid or missing API key"))
            return
        await app(scope, receive, send)

    return guard
