"""Loopback names as the resolver reads them (ADR 0044)."""

from __future__ import annotations

import pytest

from ds4.wire.requests import host_name, is_loopback_host

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
