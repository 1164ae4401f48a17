"""The session invariant of layer-split inference: a rolling hash of the token prefix
a worker's state holds (docs/distributed.md §"The session invariant").

64-bit FNV-1a over the token ids, each id as 4 little-endian bytes. Every piece of
work names the hash of the prefix it continues and the hash after it; a worker whose
state holds another prefix (it restarted, or holds another session's tokens) refuses
instead of computing on the wrong state. It detects accidents, it is no security
primitive.
"""

from __future__ import annotations

from collections.abc import Iterable

# The hash of no tokens: FNV-1a's 64-bit offset basis. (The reference's page drops its
# last digit; nothing here has to match the reference's wire, so the real basis it is.)
EMPTY = 14695981039346656037
_PRIME = 1099511628211
_MASK = (1 << 64) - 1


def extend_hash(h: int, tokens: Iterable[int]) -> int:
    """The hash of prefix + tokens, given h = the hash of the prefix."""
    for t in tokens:
        for shift in (0, 8, 16, 24):
            h = ((h ^ ((t >> shift) & 0xFF)) * _PRIME) & _MASK
    return h


def rolling_hashes(h: int, tokens: Iterable[int]) -> list[int]:
    """The hash after each token of `tokens` (prefix hash h before the first)."""
    out = []
    for t in tokens:
        for shift in (0, 8, 16, 24):
            h = ((h ^ ((t >> shift) & 0xFF)) * _PRIME) & _MASK
        out.append(h)
    return out


def prefix_hash(tokens: Iterable[int]) -> int:
    return extend_hash(EMPTY, tokens)
