"""ASGI wrapper in front of the routes: Host check, cross-site refusal, API key, CORS,
preflight (the checks themselves: request checks, below; ADR 0044).

Refusals are answered in the calling endpoint's own error shape (the shape of the
API whose routes the path is under, ds4.wire.apis.api_of_path; OpenAI elsewhere).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from ds4.adapters.http.server_state import HttpConfig
from ds4.domain.errors import ErrorKind, RequestError
from ds4.domain.serving.exchange import Api
from ds4.wire.apis import api_of_path, error_body
from ds4.wire.replies import http_status
from ds4.wire.requests import host_name, is_loopback_host, parse_host_header

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


# ---- request checks --------------------------------------------------------
# The exposure checks on a request's headers (ADR 0044), as pure functions.
#
# - Host: bound to loopback, only a loopback Host is served (DNS rebinding: a foreign
#   name pointed at 127.0.0.1 carries its own name in Host).
# - Cross-site: without --cors, a browser page of another origin is refused. Browsers
#   send `Origin` on every cross-origin POST and `Sec-Fetch-Site` on every request;
#   curl and the SDKs send neither. `text/plain` bodies are refused too: an HTML form
#   can post one (a JSON-looking body, no preflight) from browsers too old to send
#   Origin on form posts; no API client sends JSON as text/plain.
# - API key: the header's raw bytes against the key's UTF-8 bytes, in constant time.

Headers = Iterable[tuple[bytes, bytes]]

_CROSS_SITE_FETCH = frozenset({b"cross-site", b"same-site"})
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def header_bytes(headers: Headers, name: bytes) -> bytes | None:
    for key, value in headers:
        if key.lower() == name:
            return bytes(value)
    return None


def host_allowed(headers: Headers) -> bool:
    """A well-formed Host header (parsed strictly first) naming a loopback host."""
    host = header_bytes(headers, b"host")
    if host is None:
        return False
    parsed = parse_host_header(host.decode("latin-1"))
    return parsed is not None and is_loopback_host(parsed[0])


def _host_and_port(authority: str, scheme: str) -> tuple[str, str]:
    """(`host`, `port`) of an authority, the port defaulting to the scheme's."""
    authority = authority.lower()
    host = host_name(authority)
    tail = authority[authority.rfind("]") + 1 :] if authority.startswith("[") else authority
    port = tail.rsplit(":", 1)[1] if tail.count(":") == 1 else _DEFAULT_PORTS.get(scheme, "")
    return host, port


def cross_site(headers: Headers) -> bool:
    """A browser request from a page whose origin is not this server's."""
    fetch_site = header_bytes(headers, b"sec-fetch-site")
    if fetch_site is not None and fetch_site.strip().lower() in _CROSS_SITE_FETCH:
        return True
    origin = header_bytes(headers, b"origin")
    if origin is None:
        return False
    scheme, _, authority = origin.decode("latin-1").strip().lower().partition("://")
    host = header_bytes(headers, b"host")
    if not authority or host is None:
        return True  # `Origin: null` (sandboxed frames, file: pages) or no Host
    return _host_and_port(authority, scheme) != _host_and_port(host.decode("latin-1"), "http")


def text_plain_body(headers: Headers) -> bool:
    content_type = header_bytes(headers, b"content-type")
    if content_type is None:
        return False
    return content_type.split(b";", 1)[0].strip().lower() == b"text/plain"


def offered_key(headers: Headers) -> bytes | None:
    """`x-api-key`, else the token of `Authorization: Bearer`, as sent."""
    key = header_bytes(headers, b"x-api-key")
    if key:
        return key.strip()
    bearer = header_bytes(headers, b"authorization")
    if bearer is not None and bearer[:7].lower() == b"bearer ":
        return bearer[7:].strip()
    return None


def key_matches(headers: Headers, expected: bytes) -> bool:
    offered = offered_key(headers)
    return offered is not None and hmac.compare_digest(offered, expected)
