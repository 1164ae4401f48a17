"""The shared check on GGUF tokenizer tables agrees with what the tokenizers refuse.

Model validation (so `ds4 gguf inspect`) and vocabulary loading run one function;
these tests hold it to the loaders: whatever passes the check must build both BPE
tokenizers, and each way a table can be broken is named (issue 14).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.unit.tokenizer.tiny_bpe_vocab import tiny_vocabulary

from ds4.adapters.tokenizer.vocabulary import (
    TokenizerDataError,
    build_tokenizer,
    tokenizer_metadata,
    vocabulary_from_gguf_metadata,
    vocabulary_from_gguf_values,
)
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.records import MetaValue, ValueType
from ds4.domain.model.hparams import Problem
from ds4.domain.tokenizer import BYTE_TO_CHAR, check_tokenizer_tables

VOCAB = tiny_vocabulary()
BASE = tokenizer_metadata(VOCAB)
TOKENS = list(VOCAB.tokens)
MERGES = [f"{a} {b}" for a, b in VOCAB.merges]
TYPES = list(BASE["tokenizer.ggml.token_type"].items() or ())
ARRAY, STRING, INT32 = ValueType.ARRAY, ValueType.STRING, ValueType.INT32


def tables(
    tokens: list[Any] | None = TOKENS,
    merges: list[Any] | None = MERGES,
    types: list[Any] | None = TYPES,
    types_type: ValueType = INT32,
) -> dict[str, MetaValue]:
    out: dict[str, MetaValue] = {}
    if tokens is not None:
        out["tokenizer.ggml.tokens"] = MetaValue(ARRAY, tokens, STRING)
    if merges is not None:
        out["tokenizer.ggml.merges"] = MetaValue(ARRAY, merges, STRING)
    if types is not None:
        out["tokenizer.ggml.token_type"] = MetaValue(ARRAY, types, types_type)
    return out


def replaced(items: list[Any], at: int, value: Any) -> list[Any]:
    return [value if i == at else x for i, x in enumerate(items)]


def test_the_real_tables_pass() -> None:
    assert check_tokenizer_tables(BASE) == []
    assert check_tokenizer_tables(tables(types=None)) == []


LAST = len(TOKENS) - 1
BROKEN: dict[str, tuple[dict[str, MetaValue], str]] = {
    "no tokens": (tables(tokens=None), "tokenizer.ggml.tokens: missing or not an array"),
    "tokens of ints": (
        {**BASE, "tokenizer.ggml.tokens": MetaValue(ARRAY, [1, 2], INT32)},
        "tokenizer.ggml.tokens: missing or not an array",
    ),
    "empty tokens": (tables(tokens=[]), "tokenizer.ggml.tokens: is empty"),
    "no merges": (tables(merges=None), "tokenizer.ggml.merges: missing"),
    "merge without a space": (
        tables(merges=replaced(MERGES, 3, "aaa")), "merge 3 ('aaa') is not two tokens"
    ),
    "merge with an empty side": (
        tables(merges=replaced(MERGES, 0, " a")), "merge 0 (' a') is not two tokens"
    ),
    "merge part unknown": (
        tables(merges=replaced(MERGES, 2, "a zz")), "merge 2 ('a zz') needs 'zz', not a token"
    ),
    "merge result unknown": (
        tables(merges=replaced(MERGES, 2, "c a")), "merge 2 ('c a') needs 'ca', not a token"
    ),
    "types too short": (
        tables(types=TYPES[:-1]), f"token_type: has {LAST} entries for {LAST + 1} tokens"
    ),
    "types of floats": (
        tables(types=[1.0] * len(TYPES), types_type=ValueType.FLOAT32), "not an integer array"
    ),
    "types of bools": (
        tables(types=[True] * len(TYPES), types_type=ValueType.BOOL), "not an integer array"
    ),
    "byte symbol missing": (
        tables(tokens=replaced(TOKENS, 200, "<gone>")),
        f"byte symbol {BYTE_TO_CHAR[200]!r} is not a token",
    ),
    "empty added token": (
        tables(tokens=replaced(TOKENS, LAST, "")), f"added token {LAST} is an empty string"
    ),
    "empty token, no types": (
        tables(tokens=replaced(TOKENS, LAST, ""), types=None), "has an empty token"
    ),
    "special token missing": (
        tables(tokens=[t if t != "<think>" else "<thonk>" for t in TOKENS]),
        "special token '<think>' not found",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_broken_table_is_named_by_check_and_loader_alike(case: str) -> None:
    metadata, fragment = BROKEN[case]
    problems = check_tokenizer_tables(metadata)
    assert any(fragment in str(p) for p in problems), problems
    with pytest.raises(TokenizerDataError) as refused:
        vocabulary_from_gguf_metadata(metadata)
    assert str(refused.value) == "; ".join(str(p) for p in problems)
    assert "\n" not in str(refused.value)


def test_more_tokens_than_embedding_rows() -> None:
    problems = check_tokenizer_tables(BASE, n_vocab=len(TOKENS) - 1)
    assert problems == [
        Problem("tokenizer.ggml.tokens", f"{len(TOKENS)} tokens but the embedding has only "
                f"{len(TOKENS) - 1} rows")
    ]  # fmt: skip


def builds_both_tokenizers(tokens: list[str], merges: list[str], types: list[int] | None) -> bool:
    """What the loaders would do without the shared check in front of them."""
    try:
        vocab = vocabulary_from_gguf_values(tokens, merges, types)
        for backend in ("native", "reference"):
            build_tokenizer(vocab, backend)
    except Ds4Error:
        return False
    return True


PIECES = st.sampled_from(["", "a", "b", "ab", "zz", "Ġ", "<think>", "｜T｜", " ", "a b", "Ā"])


@st.composite
def broken_tables(draw: st.DrawFn) -> tuple[list[str], list[str], list[int] | None]:
    tokens, merges = list(TOKENS), list(MERGES)
    types: list[int] | None = list(TYPES) if draw(st.booleans()) else None
    for _ in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["token", "merge", "type", "drop merge", "drop type"]))
        if what == "token":
            tokens[draw(st.integers(0, len(tokens) - 1))] = draw(PIECES)
        elif what == "merge":
            merges[draw(st.integers(0, len(merges) - 1))] = draw(PIECES)
        elif what == "type" and types:
            types[draw(st.integers(0, len(types) - 1))] = draw(st.integers(-2, 6))
        elif what == "drop merge" and merges:
            merges.pop(draw(st.integers(0, len(merges) - 1)))
        elif what == "drop type" and types:
            types.pop()
    return tokens, merges, types


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken_tables())
def test_check_passes_exactly_when_both_tokenizers_build(
    drawn: tuple[list[str], list[str], list[int] | None],
) -> None:
    tokens, merges, types = drawn
    passes = not check_tokenizer_tables(tables(tokens, merges, types))
    assert passes == builds_both_tokenizers(tokens, merges, types)


def test_metadata_names_llama_cpps_pre_tokenizer() -> None:
    """Without it llama.cpp splits text its default way and gets other ids (issue 33)."""
    assert BASE["tokenizer.ggml.pre"] == MetaValue(ValueType.STRING, "deepseek-v3")
    assert BASE["tokenizer.ggml.model"] == MetaValue(ValueType.STRING, "gpt2")
