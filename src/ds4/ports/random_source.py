"""Random bytes for unguessable ids (a CSPRNG in production, a fixed script in tests)."""

from __future__ import annotations

from typing import Protocol


class RandomSource(Protocol):
    def token_bytes(self, n: int) -> bytes:
        """`n` unpredictable bytes."""
        ...
