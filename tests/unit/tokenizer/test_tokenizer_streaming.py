"""Streaming detokenization never emits broken UTF-8 and equals batch decoding."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ds4.adapters.tokenizer.bpe import Utf8StreamingDecoder
from ds4.adapters.tokenizer.pretokenize import from_symbols, to_symbols
from ds4.domain.tokenizer import BYTE_TO_CHAR

# A fake vocabulary: token i is an arbitrary byte string.
TOKEN_BYTES = st.lists(st.binary(min_size=0, max_size=4), min_size=1, max_size=12)


@settings(max_examples=400, deadline=None)
@given(TOKEN_BYTES, st.data())
def test_stream_equals_batch_decode(tokens: list[bytes], data: st.DataObject) -> None:
    ids = data.draw(st.lists(st.integers(0, len(tokens) - 1), max_size=30))
    decoder = Utf8StreamingDecoder(lambda i: tokens[i])
    chunks = [decoder.feed(i) for i in ids]
    chunks.append(decoder.flush())
    assert "".join(chunks) == b"".join(tokens[i] for i in ids).decode("utf-8", "replace")


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=30), st.data())
def test_valid_text_split_anywhere_never_yields_replacement(text: str, data: st.DataObject) -> None:
    raw = text.encode("utf-8", "replace")
    cuts = sorted(data.draw(st.sets(st.integers(0, len(raw)), max_size=8)))
    bounds = [0, *cuts, len(raw)]
    tokens = [raw[a:b] for a, b in itertools.pairwise(bounds)]
    decoder = Utf8StreamingDecoder(lambda i: tokens[i])
    out = [decoder.feed(i) for i in range(len(tokens))]
    if "\ufffd" not in text:
        assert all("\ufffd" not in piece for piece in out)
    assert "".join(out) + decoder.flush() == raw.decode("utf-8")


def test_incomplete_tail_is_held_then_flushed_as_replacement() -> None:
    tokens = [b"a\xe4\xbd", b"\xa0b", b"\xe4"]
    decoder = Utf8StreamingDecoder(lambda i: tokens[i])
    assert decoder.feed(0) == "a"
    assert decoder.feed(1) == "你b"
    assert decoder.feed(2) == ""
    assert decoder.flush() == "\ufffd"


def test_byte_level_alphabet_round_trips_every_byte() -> None:
    assert len(set(BYTE_TO_CHAR)) == 256
    assert BYTE_TO_CHAR[0x20] == "Ġ" and BYTE_TO_CHAR[0x0A] == "Ċ" and BYTE_TO_CHAR[0xAD] == "Ń"
    raw = bytes(range(256))
    assert from_symbols(to_symbols(raw)) == raw
    assert from_symbols("a｜b") == b"ab"  # outside the alphabet: dropped
