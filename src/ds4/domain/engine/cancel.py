"""Cooperative cancellation: a callback polled at chunk and token boundaries."""

from __future__ import annotations

from collections.abc import Callable

from ds4.domain.errors import Ds4Error

# Returns True when the work should stop (client gone, Ctrl+C, shutdown).
CancelCheck = Callable[[], bool]


class CancelledError(Ds4Error):  # not asyncio.CancelledError: a domain outcome
    """The cancel callback asked to stop; the state is consistent at the last boundary."""

    exit_code = 130

    def __init__(self, message: str = "cancelled") -> None:
        super().__init__(message)


def never_cancel() -> bool:
    return False
