"""Large request bodies go one at a time, on one thread of their own (ADR 0044).

A body over LARGE_BODY_BYTES, or of unknown length (chunked), waits its turn before
it is read; the others stay unread, held back by TCP flow control. So N large bodies
cost one body's parsing memory, not N. Parsing and preparing them on one dedicated
thread matters as much: glibc gives every thread its own malloc arena and keeps the
freed memory of each, so four 60 MiB bodies parsed on four pool threads left the peak
RSS at 850 MB where one thread stays at 310 MB.

Agent requests stay far below the threshold: a whole 1M-token context is about 4 MiB
of text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TypeVar

import anyio.to_thread

T = TypeVar("T")

LARGE_BODY_BYTES = 8 << 20


def is_large(declared: str | None) -> bool:
    """By the request's Content-Length header (None: not sent)."""
    return declared is None or not declared.strip().isdigit() or int(declared) > LARGE_BODY_BYTES


class LargeBodies:
    def __init__(self) -> None:
        self._turn = asyncio.Lock()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="ds4-large-body")

    def turn(self, large: bool) -> AbstractAsyncContextManager[object]:
        """Held from reading a large body to its prepared job; nothing for a small one."""
        return self._turn if large else nullcontext()

    async def run(self, large: bool, work: Callable[..., T], *args: object) -> T:
        """`work(*args)` off the event loop: on the large-body thread, or the pool's."""
        if large:
            return await asyncio.get_running_loop().run_in_executor(self._thread, work, *args)
        return await anyio.to_thread.run_sync(work, *args)
