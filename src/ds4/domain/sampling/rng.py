"""The sampler's 64-bit xorshift* generator (docs/reference/server.md §4.7), bit for bit."""

from __future__ import annotations

_MASK = (1 << 64) - 1
_ZERO_SEED = 0x9E3779B97F4A7C15
_MULTIPLIER = 0x2545F4914F6CDD1D


class XorShiftStar:
    def __init__(self, seed: int) -> None:
        """`seed` is taken modulo 2**64; 0 would stick at 0, so it is replaced."""
        self.state = (seed & _MASK) or _ZERO_SEED

    def next_u64(self) -> int:
        x = self.state
        x ^= x >> 12
        x ^= (x << 25) & _MASK
        x ^= x >> 27
        self.state = x
        return (x * _MULTIPLIER) & _MASK

    def uniform(self) -> float:
        """U in [0, 1) with 24 random bits (exact in float32)."""
        return ((self.next_u64() >> 40) & 0xFFFFFF) / 16777216.0
