"""argparse `type=` checks shared by the commands: a bad value is one usage line naming
the flag (argparse adds `argument --flag:`), exit 2, before anything is loaded.

Nothing is clamped or fixed up: a value outside its documented range is refused
(issue 14 item 9; docs/adr/0044-server-exposure-and-limits.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def host(text: str) -> str:
    """A bind address: a name or IP literal (an empty one would bind every interface)."""
    if not text or text != text.strip() or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a host name or address (0.0.0.0 listens on every interface)"
        )
    return text


def api_key(text: str) -> str:
    """A key a client can send in a header: not empty, no control characters, no
    surrounding whitespace (HTTP strips it, so such a key could never match)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty key would turn authentication off")
    if text != text.strip() or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise argparse.ArgumentTypeError(
            "the key has surrounding whitespace or control characters, which no HTTP "
            "header can carry"
        )
    return text


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An integer in low..high (both included)."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in {low}..{high}")
        return value

    parse.__name__ = f"integer in {low}..{high}"
    return parse


def float_in(low: float, high: float) -> Callable[[str], float]:
    """A finite number in low..high (both included)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low <= value <= high:  # also refuses nan; inf is out of any range here
            raise argparse.ArgumentTypeError(f"{text} is not in {low:g}..{high:g}")
        return value

    parse.__name__ = f"number in {low:g}..{high:g}"
    return parse
