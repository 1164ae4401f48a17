"""Loopback names as the resolver reads them (ADR 0044)."""

from __future__ import annotations

import pytest

from ds4.adapters.http.guard import host_allowed
from ds4.wire.requests import host_name, is_loopback_host, parse_host_header

LOOPBACK = ["127.0.0.1", "127.0.0.2", "127.255.255.254", "127.1", "127.256", "0x7f.1",
            "0177.0.0.1", "2130706433", "localhost", "LocalHost.", "::1", "[::1]",
            "0:0:0:0:0:0:0:1", "::ffff:127.0.0.5"]  # fmt: skip
FOREIGN = ["", "0.0.0.0", "::", "128.0.0.1", "126.255.255.255", "10.0.0.1", "evil.example",
           "127.0.0.1.evil.example", "localhost.evil.example", "1.2.3.4.5", "127.0.0.256",
           "0x", "08.0.0.1", "::ffff:10.0.0.1"]  # fmt: skip


@pytest.mark.parametrize("name", LOOPBACK)
def test_loopback_names(name: str) -> None:
    assert is_loopback_host(name)


@pytest.mark.parametrize("name", FOREIGN)
def test_foreign_names(name: str) -> None:
    assert not is_loopback_host(name)


def test_host_name_strips_the_port_and_brackets() -> None:
    assert host_name("[::1]:8000") == "::1"
    assert host_name("127.0.0.1:80") == "127.0.0.1"
    assert host_name("localhost") == "localhost"
    assert host_name("::1") == "::1"


# Host header values, parsed strictly (RFC 3986 host and port) before the loopback test.
HOST_HEADERS = [
    ("127.0.0.1", ("127.0.0.1", None)),
    ("127.0.0.1:8000", ("127.0.0.1", 8000)),
    ("LocalHost:1", ("localhost", 1)),
    ("localhost.:65535", ("localhost.", 65535)),
    ("[::1]", ("::1", None)),
    ("[::1]:8000", ("::1", 8000)),
    ("[::FFFF:127.0.0.5]:80", ("::ffff:127.0.0.5", 80)),
    ("evil.example:443", ("evil.example", 443)),
    ("127.1", ("127.1", None)),
    (" 127.0.0.1:80\t", ("127.0.0.1", 80)),  # optional whitespace around a field value
    ("a-b_c~d%41:9", ("a-b_c~d%41", 9)),
]
MALFORMED_HOSTS = [
    "", ":", ":8000", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:123456",
    "127.0.0.1:8000@evil.example", "127.0.0.1@evil.example", "user@127.0.0.1",
    "localhost:evil.example", "localhost:80:80", "localhost:+80", "localhost:８０",
    "::1", "[::1", "[::1]x", "[::1]:", "[::1]:0", "[::1%lo]", "[fe80::1%25eth0]",
    "[v1.fe]", "[127.0.0.1]", "local host", "localhost/", "localhost?x", "localhost#x",
    "lo%zzcalhost", "[::1]:80:80", "localhost\r\n",
]  # fmt: skip


@pytest.mark.parametrize(("value", "parsed"), HOST_HEADERS)
def test_host_headers_parse_to_host_and_port(value: str, parsed: tuple[str, int | None]) -> None:
    assert parse_host_header(value) == parsed


@pytest.mark.parametrize("value", MALFORMED_HOSTS)
def test_malformed_host_headers_are_refused(value: str) -> None:
    assert parse_host_header(value) is None


@pytest.mark.parametrize(
    ("value", "allowed"),
    [("127.0.0.1:8000", True), ("localhost", True), ("[::1]:8000", True), ("127.1:80", True),
     ("127.0.0.1:8000@evil.example", False), ("localhost:evil.example", False),
     ("evil.example:8000", False), ("127.0.0.1:0", False), ("::1", False), ("", False)],
)  # fmt: skip
def test_the_guard_allows_only_well_formed_loopback_hosts(value: str, allowed: bool) -> None:
    assert host_allowed([(b"Host", value.encode("latin-1"))]) is allowed
    assert host_allowed([]) is False
