"""Incremental detokenization that never splits a UTF-8 character."""

from __future__ import annotations

import codecs
from collections.abc import Callable


class Utf8StreamingDecoder:
    """Feeds token bytes through an incremental UTF-8 decoder.

    An incomplete trailing sequence stays inside the decoder until the next token
    completes it; invalid bytes become U+FFFD exactly where a batch
    `bytes.decode("utf-8", "replace")` of the whole stream would put them.
    """

    def __init__(self, token_bytes: Callable[[int], bytes]) -> None:
        self._token_bytes = token_bytes
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token_id: int) -> str:
        return self._utf8.decode(self._token_bytes(token_id))

    def flush(self) -> str:
        return self._utf8.decode(b"", final=True)
