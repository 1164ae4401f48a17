"""The Tokenizer port on the native fast path (ds4._native_tokenizer).

Python resolves every string to an id once, at construction; the C side then sees
only bytes and ids: added-token split, pre-tokenization and merges in one call.
"""

from __future__ import annotations

from typing import Any

from ds4 import _native_tokenizer  # type: ignore[attr-defined]
from ds4.adapters.tokenizer.bpe import TokenTable, utf8_of
from ds4.adapters.tokenizer.vocabulary import TokenizerDataError, Vocabulary
from ds4.domain.tokenizer.byte_alphabet import BYTE_TO_CHAR

_ffi = _native_tokenizer.ffi
_lib = _native_tokenizer.lib


class NativeBpeTokenizer(TokenTable):
    def __init__(self, vocab: Vocabulary) -> None:
        super().__init__(vocab)
        self._handle = self._create(vocab)

    def _id(self, token: str, what: str) -> int:
        token_id = self._ids.get(token)
        if token_id is None:
            raise TokenizerDataError(f"{what} {token!r} is not in the vocabulary")
        return token_id

    def _create(self, vocab: Vocabulary) -> Any:
        byte_ids = [self._id(c, "byte symbol") for c in BYTE_TO_CHAR]
        left, right, result = [], [], []
        for a, b in vocab.merges:
            left.append(self._id(a, "merge part"))
            right.append(self._id(b, "merge part"))
            result.append(self._id(a + b, "merge result"))
        texts = [t.content.encode("utf-8") for t in vocab.added]
        offsets = [0]
        for raw in texts:
            offsets.append(offsets[-1] + len(raw))
        handle = _lib.ds4_tok_create(
            _ffi.new("int32_t[]", byte_ids),
            len(left),
            _ffi.new("int32_t[]", left),
            _ffi.new("int32_t[]", right),
            _ffi.new("int32_t[]", result),
            len(texts),
            _ffi.new("uint8_t[]", b"".join(texts) or b"\0"),
            _ffi.new("int64_t[]", offsets),
            _ffi.new("int32_t[]", [t.id for t in vocab.added] or [0]),
            _ffi.new("uint8_t[]", [int(t.early) for t in vocab.added] or [0]),
        )
        if handle == _ffi.NULL:
            raise TokenizerDataError("native tokenizer rejected the vocabulary")
        return _ffi.gc(handle, _lib.ds4_tok_destroy)

    def encode(self, text: str) -> list[int]:
        raw = utf8_of(text)
        if not raw:
            return []
        out = _ffi.new("int32_t[]", len(raw))
        count = _lib.ds4_tok_encode(self._handle, raw, len(raw), out)
        if count < 0:
            raise MemoryError("native tokenizer ran out of memory")
        ids: list[int] = _ffi.unpack(out, count)
        return ids


def native_pretokenize(text: str) -> list[str]:
    """The native pre-tokenizer's pieces (no added-token split), for tests and tools."""
    raw = utf8_of(text)
    if not raw:
        return []
    ends = _ffi.new("int64_t[]", len(raw))
    count = _lib.ds4_tok_pretokenize(raw, len(raw), ends)
    if count < 0:
        raise MemoryError("native tokenizer ran out of memory")
    pieces, start = [], 0
    for end in _ffi.unpack(ends, count):
        pieces.append(raw[start:end].decode("utf-8"))
        start = end
    return pieces


def native_char_class(cp: int) -> int:
    return int(_lib.ds4_tok_char_class(cp))
