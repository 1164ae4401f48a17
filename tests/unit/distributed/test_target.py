"""`--distributed`: ray://HOST:PORT or local:N, refused with the accepted forms."""

from __future__ import annotations

import pytest

from ds4.domain.distributed import DistributedTarget, parse_target
from ds4.domain.errors import Ds4Error


def test_targets() -> None:
    assert parse_target("local:3") == DistributedTarget(None, 3)
    assert parse_target("ray://10.0.0.5:10001") == DistributedTarget("ray://10.0.0.5:10001")
    assert parse_target("ray://[::1]:10001").address == "ray://[::1]:10001"
    assert str(parse_target("local:2")) == "local:2"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("local:0", "N in 1..64"),
        ("local:65", "N in 1..64"),
        ("local:two", "N in 1..64"),
        ("ray://host", "expected ray://HOST:PORT"),
        ("ray://host:0", "expected ray://HOST:PORT"),
        ("ray://:10001", "expected ray://HOST:PORT"),
        ("10.0.0.5:6379", "expected ray://HOST:PORT or local:N"),
    ],
)
def test_bad_targets_say_what_is_accepted(text: str, message: str) -> None:
    with pytest.raises(Ds4Error, match=message):
        parse_target(text)
