"""Sampling settings of one generation, normalized as docs/reference/server.md §4.7 says."""

from __future__ import annotations

from dataclasses import dataclass

MAX_TOP_K = 1024


@dataclass(frozen=True)
class SamplingParams:
    """temperature <= 0 means greedy; top_k <= 0, top_p = 1 and min_p = 0 mean off.

    `seed` must already be resolved to a positive value (the caller draws one from a
    random-source port when the user gave none), so a run is reproducible from it.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int = 1

    @property
    def greedy(self) -> bool:
        return not self.temperature > 0  # NaN is greedy too

    def normalized(self) -> SamplingParams:
        """Out-of-range values mapped to their 'off' meaning."""
        top_p = self.top_p if 0.0 < self.top_p <= 1.0 else 1.0
        min_p = self.min_p if self.min_p > 0.0 else 0.0
        return SamplingParams(
            temperature=self.temperature,
            top_k=min(self.top_k, MAX_TOP_K),
            top_p=top_p,
            min_p=min_p,
            seed=self.seed,
        )


GREEDY = SamplingParams(temperature=0.0)


def seed_from_bytes(data: bytes) -> int:
    """A positive 64-bit seed from random bytes (a RandomSource's output)."""
    value = int.from_bytes(data[:8].ljust(8, b"\0"), "little") & ((1 << 63) - 1)
    return value or 1
