"""Our tokenizer against HF `tokenizers` on the same tokenizer.json: zero mismatches."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.integration.tokenizer.tokenizer_corpus import TRICKY
from tests.integration.tokenizer.tokenizer_oracle import (
    corpus_chunks,
    hf,
    hf_corpus_ids,
    hf_ids,
    native,
    reference,
    vocabulary,
)


def first_mismatch(ours: list[int], theirs: list[int]) -> str:
    i = next((k for k, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), None)
    i = min(len(ours), len(theirs)) if i is None else i
    return f"at token {i}: ours {ours[i : i + 5]} vs HF {theirs[i : i + 5]}"


def test_corpus_is_large_and_holds_every_added_token() -> None:
    text = "".join(corpus_chunks())
    assert len(text.encode("utf-8")) >= 1_000_000
    assert all(t.content in text for t in vocabulary().added)


def test_native_matches_hf_on_the_whole_corpus() -> None:
    for chunk, theirs in zip(corpus_chunks(), hf_corpus_ids(), strict=True):
        ours = native().encode(chunk)
        assert ours == theirs, first_mismatch(ours, theirs)
        assert native().decode(ours) == chunk


def test_reference_matches_hf_on_a_corpus_sample() -> None:
    chunk, theirs = corpus_chunks()[1], hf_corpus_ids()[1]
    sample = chunk[:50_000]
    ours = reference().encode(sample)
    assert ours == hf_ids(sample), first_mismatch(ours, theirs)


@pytest.mark.slow
def test_reference_matches_hf_on_the_whole_corpus() -> None:
    for chunk, theirs in zip(corpus_chunks(), hf_corpus_ids(), strict=True):
        assert reference().encode(chunk) == theirs


@pytest.mark.parametrize("text", TRICKY, ids=[repr(t)[:30] for t in TRICKY])
def test_tricky_strings(text: str) -> None:
    theirs = hf_ids(text)
    assert native().encode(text) == theirs
    assert reference().encode(text) == theirs
    assert native().decode(theirs) == text


def test_every_added_token_is_recognized_mid_text() -> None:
    for token in vocabulary().added:
        text = f"a{token.content}b {token.content}\n"
        ours = native().encode(text)
        assert ours == hf_ids(text), token.content
        assert ours.count(token.id) == 2


def test_worked_examples_from_the_spec() -> None:
    e1 = "<｜begin▁of▁sentence｜>You are terse.<｜User｜>Hello<｜Assistant｜></think>"
    assert native().encode(e1) == [0, 3476, 477, 259, 10935, 16, 128803, 19923, 128804, 128822]
    assert native().encode("<think>") == [128821]
    assert native().encode("<｜tool▁calls▁begin｜>") == [128806]  # every added token counts
    special = native().special
    assert (special.bos, special.eos, special.user, special.assistant) == (0, 1, 128803, 128804)
    assert (special.think_open, special.think_close, special.dsml) == (128821, 128822, 128825)
    assert native().token_bytes(223) == b" " and native().token_bytes(271) == b"\n\n"


MIXED = st.lists(
    st.one_of(
        st.sampled_from(TRICKY),
        st.text(max_size=6),
        st.sampled_from([" ", "\n", "\t", "12", "é", "你好", "«", "»", "<think>", "｜DSML｜"]),
    ),
    max_size=12,
).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MIXED)
def test_random_strings_match_hf_and_round_trip(text: str) -> None:
    text = text.encode("utf-8", "replace").decode("utf-8")
    ours = native().encode(text)
    assert ours == hf().encode(text, add_special_tokens=False).ids
    assert native().decode(ours) == text


@settings(max_examples=100, deadline=None)
@given(MIXED, st.data())
def test_streaming_decode_equals_batch_for_any_split(text: str, data: st.DataObject) -> None:
    text = text.encode("utf-8", "replace").decode("utf-8")
    ids = native().encode(text)
    decoder = native().streaming_decoder()
    cut = data.draw(st.integers(0, len(ids)))
    out = "".join(decoder.feed(i) for i in ids[:cut]) + "".join(decoder.feed(i) for i in ids[cut:])
    assert out + decoder.flush() == text
