"""The session invariant's rolling hash: 64-bit FNV-1a over each token id's 4
little-endian bytes, checked against a byte-wise statement of the algorithm."""

from __future__ import annotations

import struct

from ds4.domain.distributed import EMPTY, extend_hash, prefix_hash, rolling_hashes


def fnv1a_bytes(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) % 2**64
    return h


def test_empty_prefix_is_the_offset_basis() -> None:
    assert EMPTY == fnv1a_bytes(b"") == prefix_hash([])


def test_tokens_hash_as_their_little_endian_bytes() -> None:
    tokens = [0, 1, 255, 256, 128803, 2**32 - 1]
    assert prefix_hash(tokens) == fnv1a_bytes(b"".join(struct.pack("<I", t) for t in tokens))


def test_the_hash_rolls_token_by_token() -> None:
    tokens = [5, 9, 129279, 0, 42]
    rolled = rolling_hashes(EMPTY, tokens)
    assert rolled == [prefix_hash(tokens[: i + 1]) for i in range(len(tokens))]
    assert extend_hash(prefix_hash(tokens[:2]), tokens[2:]) == prefix_hash(tokens)


def test_order_and_content_change_the_hash() -> None:
    assert prefix_hash([1, 2]) != prefix_hash([2, 1])
    assert prefix_hash([1, 2]) != prefix_hash([1, 2, 0])
    assert prefix_hash([256]) != prefix_hash([1])
