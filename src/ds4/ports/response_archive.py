"""ResponseArchive: where stored Responses records outlive the process (docs/kv-cache.md,
stored responses; docs/adr/0069-stored-responses.md).

The store (domain/serving/response_store.py) decides what is kept and encodes each
record with its checksum; the archive only holds named byte strings. A name is a
response id (`resp_` + letters, digits, `_`, `-`), already checked by the store.
"""

from __future__ import annotations

from typing import Protocol


class ResponseArchive(Protocol):
    def names(self) -> list[str]:
        """The ids of every record present (no file is read)."""
        ...

    def read(self, name: str, limit: int) -> bytes | None:
        """The record's bytes; None when it is gone, unreadable or over `limit` bytes."""
        ...

    def write(self, name: str, data: bytes) -> None:
        """Replace the record atomically (a reader sees the old bytes or the new);
        OSError when it cannot be written."""
        ...

    def delete(self, name: str) -> None:
        """Remove the record (nothing when it is not there); OSError on failure."""
        ...
