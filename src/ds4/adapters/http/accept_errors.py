"""accept() failing for lack of file descriptors: one warning line a minute instead of
asyncio's traceback every second (it retries the accept itself after a second)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ds4.adapters.http.rate_limited_log import RateLimitedWarning

# the message asyncio's selector loop reports (asyncio/selector_events.py)
ACCEPT_OUT_OF_RESOURCE = "socket.accept() out of system resource"

log = RateLimitedWarning(logging.getLogger("ds4.server"))


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == ACCEPT_OUT_OF_RESOURCE:
            error = context.get("exception")
            reason = getattr(error, "strerror", None) or str(error)
            log.report(
                "accept",
                f"accept() failed ({reason}); new connections wait: lower --max-connections "
                "or raise the open-file limit (ulimit -n)",
            )
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
