"""The exposure checks on a request's headers (ADR 0044), as pure functions.

- Host: bound to loopback, only a loopback Host is served (DNS rebinding: a foreign
  name pointed at 127.0.0.1 carries its own name in Host).
- Cross-site: without --cors, a browser page of another origin is refused. Browsers
  send `Origin` on every cross-origin POST and `Sec-Fetch-Site` on every request;
  curl and the SDKs send neither. `text/plain` bodies are refused too: an HTML form
  can post one (a JSON-looking body, no preflight) from browsers too old to send
  Origin on form posts; no API client sends JSON as text/plain.
- API key: the header's raw bytes against the key's UTF-8 bytes, in constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from ds4.wire.requests import host_name, is_loopback_host

Headers = Iterable[tuple[bytes, bytes]]

_CROSS_SITE_FETCH = frozenset({b"cross-site", b"same-site"})
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def header_bytes(headers: Headers, name: bytes) -> bytes | None:
    for key, value in headers:
        if key.lower() == name:
            return bytes(value)
    return None


def host_allowed(headers: Headers) -> bool:
    host = header_bytes(headers, b"host")
    return host is not None and is_loopback_host(host_name(host.decode("latin-1")))


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
