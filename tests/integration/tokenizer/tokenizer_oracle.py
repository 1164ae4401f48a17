"""Shared objects for the oracle tests: our two adapters and HF `tokenizers` on one file."""

from __future__ import annotations

from functools import cache
from typing import Any

from tests.integration.tokenizer.tokenizer_corpus import build_corpus
from tokenizers import Tokenizer as HFTokenizer

from ds4.adapters.tokenizer.bpe import NativeBpeTokenizer, ReferenceBpeTokenizer
from ds4.adapters.tokenizer.vocabulary import (
    Vocabulary,
    default_tokenizer_json,
    load_tokenizer_json,
)


@cache
def vocabulary() -> Vocabulary:
    return load_tokenizer_json()


@cache
def native() -> NativeBpeTokenizer:
    return NativeBpeTokenizer(vocabulary())


@cache
def reference() -> ReferenceBpeTokenizer:
    return ReferenceBpeTokenizer(vocabulary())


@cache
def hf() -> Any:
    return HFTokenizer.from_file(str(default_tokenizer_json()))


def hf_ids(text: str) -> list[int]:
    ids: list[int] = hf().encode(text, add_special_tokens=False).ids
    return ids


@cache
def corpus_chunks() -> tuple[str, ...]:
    """The >= 1 MB corpus in 64 KiB-character chunks (HF is slow on one huge string)."""
    text = build_corpus([t.content for t in vocabulary().added])
    return tuple(text[i : i + 65536] for i in range(0, len(text), 65536))


@cache
def hf_corpus_ids() -> tuple[list[int], ...]:
    encodings = hf().encode_batch(list(corpus_chunks()), add_special_tokens=False)
    return tuple(e.ids for e in encodings)
