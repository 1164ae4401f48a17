"""Build a Vocabulary from a tokenizer.json file or from GGUF `tokenizer.ggml.*` values."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from ds4.adapters.files import read_limited
from ds4.adapters.tokenizer.byte_level import BYTE_TO_CHAR
from ds4.adapters.tokenizer.vocabulary import AddedToken, TokenizerDataError, Vocabulary
from ds4.domain.gguf.records import MetaValue
from ds4.domain.tokenizer import (
    MERGES_KEY,
    TOKEN_TYPE_CONTROL,
    TOKEN_TYPE_USER_DEFINED,
    TOKEN_TYPES_KEY,
    TOKENS_KEY,
    check_tokenizer_tables,
    split_merge,
)

__all__ = ["TOKEN_TYPE_CONTROL", "TOKEN_TYPE_USER_DEFINED"]  # re-exported for writers

# DeepSeek V4's tokenizer.json is 6 MiB; the largest known ones (256k vocabularies) ~35.
MAX_TOKENIZER_JSON_BYTES = 64 << 20


def _parse_merge(entry: object, rank: int) -> tuple[str, str]:
    if isinstance(entry, str):
        pair = split_merge(entry)
        if pair is not None:
            return pair
    elif isinstance(entry, list) and len(entry) == 2 and all(isinstance(s, str) for s in entry):
        return entry[0], entry[1]
    raise TokenizerDataError(f"merge {rank} is not two tokens separated by a space: {entry!r}")


def vocabulary_from_tokenizer_json(path: str | Path) -> Vocabulary:
    """Read a Hugging Face tokenizer.json whose model is byte-level BPE."""
    try:
        doc = json.loads(read_limited(path, MAX_TOKENIZER_JSON_BYTES).decode("utf-8"))
    except OSError as exc:
        raise TokenizerDataError(f"cannot read {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TokenizerDataError(f"{path} is not a JSON tokenizer file: {exc}") from None
    model = doc.get("model") if isinstance(doc, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE":
        raise TokenizerDataError(f"{path}: model is not a BPE tokenizer")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):
        raise TokenizerDataError(f"{path}: model.vocab is missing")
    by_id: dict[int, str] = {int(i): s for s, i in vocab.items()}
    added: list[AddedToken] = []
    for entry in doc.get("added_tokens") or []:
        token = AddedToken(
            id=int(entry["id"]), content=entry["content"], early=not entry.get("normalized", True)
        )
        by_id[token.id] = token.content
        added.append(token)
    size = max(by_id) + 1 if by_id else 0
    if len(by_id) != size:
        missing = next(i for i in range(size) if i not in by_id)
        raise TokenizerDataError(f"{path}: token id {missing} is missing from the vocabulary")
    merges = tuple(_parse_merge(m, r) for r, m in enumerate(model.get("merges") or []))
    tokens = tuple(by_id[i] for i in range(size))
    return Vocabulary(tokens=tokens, merges=merges, added=tuple(added))


def vocabulary_from_gguf_values(
    tokens: Sequence[str], merges: Sequence[str], token_types: Sequence[int] | None
) -> Vocabulary:
    """Build from `tokenizer.ggml.tokens`, `.merges` and (optionally) `.token_type`.

    Added tokens are the CONTROL (matched first) and USER_DEFINED (matched in the
    gaps) entries. Without a token_type array, every token that is neither one byte
    symbol nor the result of a merge is taken as added; for DeepSeek V4 that is
    exactly tokenizer.json's added set (ids 0-2 and 128000+), see ADR 0010.
    """
    merge_pairs = tuple(_parse_merge(m, r) for r, m in enumerate(merges))
    if token_types is not None:
        if len(token_types) != len(tokens):
            raise TokenizerDataError(
                f"tokenizer.ggml.token_type has {len(token_types)} entries for {len(tokens)} tokens"
            )
        added = tuple(
            AddedToken(id=i, content=tokens[i], early=t == TOKEN_TYPE_CONTROL)
            for i, t in enumerate(token_types)
            if t in (TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED)
        )
    else:
        reachable = set(BYTE_TO_CHAR) | {a + b for a, b in merge_pairs}
        added = tuple(
            AddedToken(id=i, content=t, early=True)
            for i, t in enumerate(tokens)
            if t not in reachable
        )
    return Vocabulary(tokens=tuple(tokens), merges=merge_pairs, added=added)


def vocabulary_from_gguf_metadata(metadata: Mapping[str, MetaValue]) -> Vocabulary:
    """Read `tokenizer.ggml.tokens`, `.merges` and optional `.token_type` from GGUF metadata.

    The tables are checked first by the same function model validation (and so
    `ds4 gguf inspect`) uses; a refusal names every problem on one line.
    """
    problems = check_tokenizer_tables(metadata)
    if problems:
        raise TokenizerDataError("; ".join(str(p) for p in problems))
    tokens = list(metadata[TOKENS_KEY].items() or ())
    merges = list(metadata[MERGES_KEY].items() or ())
    types_meta = metadata.get(TOKEN_TYPES_KEY)
    types = None if types_meta is None else [int(t) for t in types_meta.items() or ()]
    return vocabulary_from_gguf_values(tokens, merges, types)
