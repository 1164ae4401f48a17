"""The `tokenizer.ggml.*` GGUF records for a vocabulary (what converters embed)."""

from __future__ import annotations

from ds4.adapters.tokenizer.vocab_loading import TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED
from ds4.adapters.tokenizer.vocabulary import Vocabulary
from ds4.domain.gguf.records import MetaValue, ValueType, meta_str, meta_u32

TOKEN_TYPE_NORMAL = 1
BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"


def tokenizer_metadata(vocab: Vocabulary) -> dict[str, MetaValue]:
    """Tokens by id, merges as "left right", token types (control = matched first)."""
    types = [TOKEN_TYPE_NORMAL] * len(vocab.tokens)
    for added in vocab.added:
        types[added.id] = TOKEN_TYPE_CONTROL if added.early else TOKEN_TYPE_USER_DEFINED
    out = {
        "tokenizer.ggml.model": meta_str("gpt2"),
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
