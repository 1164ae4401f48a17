"""Merge order, added-token matching and decoding on a tiny vocabulary; both adapters."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.tokenizer.tiny_bpe_vocab import tiny_vocabulary

from ds4.adapters.tokenizer.bpe import (
    NativeBpeTokenizer,
    ReferenceBpeTokenizer,
    TokenTable,
    merge_symbols,
)
from ds4.adapters.tokenizer.vocabulary import AddedToken, TokenizerDataError, Vocabulary
from ds4.domain.errors import Ds4Error

VOCAB = tiny_vocabulary()
REFERENCE = ReferenceBpeTokenizer(VOCAB)
NATIVE = NativeBpeTokenizer(VOCAB)
BOTH = [REFERENCE, NATIVE]
RANKS = {pair: rank for rank, pair in enumerate(VOCAB.merges)}


def pieces(tok: TokenTable, ids: list[int]) -> list[str]:
    return [tok.piece(i) for i in ids]


def test_lowest_rank_merges_first_and_leftmost_among_equals() -> None:
    assert merge_symbols(list("aaa"), {("a", "a"): 0}) == ["aa", "a"]  # not "a", "aa"
    assert merge_symbols(list("aaa"), RANKS) == ["aaa"]  # "a a" then "aa a"
    assert merge_symbols(list("aaaa"), RANKS) == ["aa", "aa"]  # "a a" (rank 0) beats "aa a"
    assert merge_symbols(list("abc"), RANKS) == ["a", "bc"]  # "b c" outranks "a b"
    assert merge_symbols(list("Ġabc"), RANKS) == ["Ġabc"]


@pytest.mark.parametrize("tok", BOTH, ids=["reference", "native"])
def test_encode_merges_within_pieces(tok: TokenTable) -> None:
    ids = tok.encode("aaa abc")  # type: ignore[attr-defined]
    assert pieces(tok, ids) == ["aaa", "Ġabc"]
    assert pieces(tok, tok.encode("1234")) == ["123", "4"]  # type: ignore[attr-defined]
    assert pieces(tok, tok.encode(" " * 9)) == ["ĠĠĠĠ", "ĠĠĠĠ", "Ġ"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("tok", BOTH, ids=["reference", "native"])
def test_added_tokens_are_matched_in_two_leftmost_longest_passes(tok: TokenTable) -> None:
    enc = tok.encode  # type: ignore[attr-defined]
    # "<x>" and "y>" are early, "<xy>" is late: early matches win even when shorter.
    assert pieces(tok, enc("<xy>")) == ["<", "x", "y>"]
    assert pieces(tok, enc("a<x>b")) == ["a", "<x>", "b"]
    assert pieces(tok, enc("｜T｜｜T｜")) == ["｜T｜", "｜T｜"]
    assert pieces(tok, enc("<think></think>")) == ["<think>", "</think>"]
    # BPE never merges across an added token.
    assert pieces(tok, enc("aa<x>a")) == ["aa", "<x>", "a"]


@pytest.mark.parametrize("tok", BOTH, ids=["reference", "native"])
def test_lone_surrogate_is_a_clear_error(tok: TokenTable) -> None:
    with pytest.raises(Ds4Error, match="lone surrogate U\\+D800"):
        tok.encode("ok \ud800")  # type: ignore[attr-defined]


def test_special_ids_and_tables() -> None:
    special = NATIVE.special
    assert NATIVE.piece(special.bos) == "<｜begin▁of▁sentence｜>"
    assert NATIVE.piece(special.dsml) == "｜DSML｜"
    assert NATIVE.is_added(special.think_open) and not NATIVE.is_added(0)
    assert NATIVE.token_id("Ġabc") is not None and NATIVE.token_id("zzz") is None
    assert NATIVE.token_bytes(NATIVE.token_id("Ġabc") or 0) == b" abc"
    assert NATIVE.token_bytes(-1) == b"" and NATIVE.token_bytes(10**9) == b""
    with pytest.raises(Ds4Error, match="outside the vocabulary"):
        NATIVE.piece(NATIVE.vocab_size)


def test_missing_special_token_is_reported() -> None:
    vocab = Vocabulary(tokens=VOCAB.tokens[:260], merges=(), added=())
    with pytest.raises(TokenizerDataError, match="no bos token"):
        ReferenceBpeTokenizer(vocab)


def test_merge_with_unknown_token_is_reported() -> None:
    vocab = Vocabulary(tokens=VOCAB.tokens, merges=(*VOCAB.merges, ("q", "q")), added=VOCAB.added)
    with pytest.raises(TokenizerDataError, match="'q'"):
        ReferenceBpeTokenizer(vocab)
    with pytest.raises(TokenizerDataError, match="'qq'"):
        NativeBpeTokenizer(vocab)


def test_added_token_must_match_its_vocabulary_entry() -> None:
    with pytest.raises(TokenizerDataError, match="does not match"):
        Vocabulary(tokens=("a", "b"), merges=(), added=(AddedToken(1, "c", True),))


TEXT = st.lists(
    st.sampled_from([*"aabbc 123\n\t<>xy｜T", "<x>", "<xy>", "é", "你", "😀"]), max_size=40
).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_native_equals_reference_and_round_trips(text: str) -> None:
    ids = NATIVE.encode(text)
    assert ids == REFERENCE.encode(text)
    assert NATIVE.decode(ids) == text
