"""Tokenizer data as plain values: the GPT-2 byte-level alphabet and the checks on a
GGUF's tokenizer tables (`tokenizer.ggml.*`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ds4.domain.gguf.records import INTEGER_TYPES, MetaValue, ValueType
from ds4.domain.model.hparams import Problem

# --- byte alphabet ---
# The GPT-2 byte-level alphabet: every byte is one printable code point
# (docs/reference/chat-and-dsml.md §1.3).


def _byte_to_char() -> tuple[str, ...]:
    kept = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars: dict[int, str] = {b: chr(b) for b in kept}
    shifted = 0x100
    for b in range(256):
        if b not in chars:
            chars[b] = chr(shifted)
            shifted += 1
    return tuple(chars[b] for b in range(256))


BYTE_TO_CHAR: tuple[str, ...] = _byte_to_char()


# --- gguf tables ---
# Checks on a GGUF's tokenizer tables (`tokenizer.ggml.*`).
#
# One function for both readers: model validation (so `ds4 gguf inspect`) and vocabulary
# loading run it, so inspect never calls valid a tokenizer the engine refuses
# (docs/adr/0004-gguf-validation.md). It covers everything the BPE tokenizers refuse:
# table types, matching lengths, merges over known tokens, the byte alphabet, non-empty
# added tokens and the special tokens the chat format needs.

TOKENS_KEY = "tokenizer.ggml.tokens"
MERGES_KEY = "tokenizer.ggml.merges"
TOKEN_TYPES_KEY = "tokenizer.ggml.token_type"

# llama.cpp token types; these two mark added tokens (matched before BPE).
TOKEN_TYPE_CONTROL = 3
TOKEN_TYPE_USER_DEFINED = 4
ADDED_TOKEN_TYPES = frozenset({TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED})

# Token ids are int32 in the native tokenizer; n_vocab has the same bound (hparam_ranges).
MAX_TOKENS = 1 << 24

# Strings the engine needs as single tokens (docs/reference/chat-and-dsml.md §1.2).
REQUIRED_SPECIAL_TOKENS = (
    "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>",
    "<｜User｜>",
    "<｜Assistant｜>",
    "<think>",
    "</think>",
    "｜DSML｜",
)

_SHOWN_CHARS = 40  # longer strings are cut in messages, which stay one short line


def split_merge(entry: str) -> tuple[str, str] | None:
    """A GGUF merge is "left right": split at the first space; None if a side is empty."""
    left, sep, right = entry.partition(" ")
    return (left, right) if sep and left and right else None


def string_table(meta: MetaValue | None) -> Sequence[str] | None:
    """The items of an array of strings; None if absent or anything else."""
    items = meta.items() if meta is not None else None
    if items is None or meta is None or meta.item_type is not ValueType.STRING:
        return None
    if isinstance(items, list) and not all(isinstance(s, str) for s in items):
        return None  # a list built in code that breaks its declared type
    return items


def _all_ints(items: Sequence[object]) -> bool:
    """Arrays read from a file hold their item type; lists built in code are checked."""
    if not isinstance(items, list):
        return True
    return all(isinstance(t, int) and not isinstance(t, bool) for t in items)


def _short(text: str) -> str:
    return repr(text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "...")


def check_tokenizer_tables(
    metadata: Mapping[str, MetaValue], n_vocab: int | None = None
) -> list[Problem]:
    """Every problem (the first of each kind) that would stop the tokenizer from loading.

    n_vocab: rows of the model's token embedding, which the tokens must not exceed.
    """
    tokens = string_table(metadata.get(TOKENS_KEY))
    if tokens is None:
        return [Problem(TOKENS_KEY, "missing or not an array of strings")]
    if not tokens:
        return [Problem(TOKENS_KEY, "is empty")]
    if len(tokens) > MAX_TOKENS:
        return [Problem(TOKENS_KEY, f"{len(tokens)} tokens, more than {MAX_TOKENS}")]
    out: list[Problem] = []
    if n_vocab is not None and len(tokens) > n_vocab:
        out.append(
            Problem(TOKENS_KEY, f"{len(tokens)} tokens but the embedding has only {n_vocab} rows")
        )
    known = set(tokens)
    out += _check_merges(metadata.get(MERGES_KEY), known)
    out += _check_added(metadata.get(TOKEN_TYPES_KEY), tokens, known)
    missing_byte = next((c for c in BYTE_TO_CHAR if c not in known), None)
    if missing_byte is not None:
        out.append(Problem(TOKENS_KEY, f"byte symbol {missing_byte!r} is not a token"))
    out += [
        Problem(TOKENS_KEY, f"special token {special!r} not found")
        for special in REQUIRED_SPECIAL_TOKENS
        if special not in known
    ]
    return out


def _check_merges(meta: MetaValue | None, known: set[str]) -> list[Problem]:
    merges = string_table(meta)
    if merges is None:
        return [Problem(MERGES_KEY, "missing or not an array of strings")]
    if len(merges) > MAX_TOKENS:
        return [Problem(MERGES_KEY, f"{len(merges)} merges, more than {MAX_TOKENS}")]
    for rank, entry in enumerate(merges):
        pair = split_merge(entry)
        if pair is None:
            return [
                Problem(MERGES_KEY, f"merge {rank} ({_short(entry)}) is not two tokens and a space")
            ]
        for part in (pair[0], pair[1], pair[0] + pair[1]):
            if part not in known:
                return [
                    Problem(
                        MERGES_KEY,
                        f"merge {rank} ({_short(entry)}) needs {_short(part)}, not a token",
                    )
                ]
    return []


def _check_added(meta: MetaValue | None, tokens: Sequence[str], known: set[str]) -> list[Problem]:
    """token_type matches the tokens; no added token is empty (nothing could match it).

    Without token_type every token BPE cannot produce is added (ADR 0010), and the
    empty string is one of them.
    """
    if meta is None:
        if "" in known:
            return [Problem(TOKENS_KEY, "has an empty token, which would be an added token")]
        return []
    types = meta.items()
    if types is None or meta.item_type not in INTEGER_TYPES or not _all_ints(types):
        return [Problem(TOKEN_TYPES_KEY, f"stored as {meta.describe_type()}, not an integer array")]
    if len(types) != len(tokens):
        return [Problem(TOKEN_TYPES_KEY, f"has {len(types)} entries for {len(tokens)} tokens")]
    if "" in known:
        for token_id, kind in enumerate(types):
            if kind in ADDED_TOKEN_TYPES and tokens[token_id] == "":
                return [Problem(TOKENS_KEY, f"added token {token_id} is an empty string")]
    return []
