"""RandomSource backed by the operating system's CSPRNG."""

from __future__ import annotations

import secrets


class SystemRandom:
    def token_bytes(self, n: int) -> bytes:
        return secrets.token_bytes(n)
