"""A small hand-made byte-level BPE vocabulary for fast unit tests."""

from __future__ import annotations

from ds4.adapters.tokenizer.bpe import SPECIAL_STRINGS
from ds4.adapters.tokenizer.vocabulary import AddedToken, Vocabulary
from ds4.domain.tokenizer import BYTE_TO_CHAR

# Rank order matters: "a a" outranks "aa a", and "b c" outranks "a b".
MERGES = [
    ("a", "a"),
    ("b", "c"),
    ("a", "b"),
    ("aa", "a"),
    ("Ġ", "a"),
    ("Ġa", "bc"),
    ("Ġ", "Ġ"),
    ("ĠĠ", "ĠĠ"),
    ("Ċ", "Ċ"),
    ("1", "2"),
    ("12", "3"),
]

EXTRA_ADDED = [("<x>", True), ("<xy>", False), ("y>", True), ("｜T｜", False)]


def tiny_vocabulary() -> Vocabulary:
    tokens = list(BYTE_TO_CHAR)
    for a, b in MERGES:
        if a + b not in tokens:
            tokens.append(a + b)
    added = []
    for content, early in [*((s, True) for s in SPECIAL_STRINGS.values()), *EXTRA_ADDED]:
        added.append(AddedToken(id=len(tokens), content=content, early=early))
        tokens.append(content)
    return Vocabulary(tokens=tuple(tokens), merges=tuple(MERGES), added=tuple(added))
