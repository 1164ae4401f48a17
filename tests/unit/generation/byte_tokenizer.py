"""A byte tokenizer for generation tests: one token per byte plus the chat specials.

Every multi-byte character spans several tokens, so UTF-8 holding is always exercised;
the seven control strings are single tokens, as in the real vocabulary.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence

from ds4.domain.chat import SPECIAL_STRINGS
from ds4.ports.tokenizer import SpecialTokenIds

SPECIALS = tuple(SPECIAL_STRINGS)  # BOS EOS User Assistant <think> </think> ｜DSML｜
VOCAB = 256 + len(SPECIALS)


class _Utf8Stream:
    def __init__(self, tokenizer: ByteTokenizer) -> None:
        self._tokenizer = tokenizer
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, token_id: int) -> str:
        return self._decoder.decode(self._tokenizer.token_bytes(token_id))

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)


class ByteTokenizer:
    @property
    def vocab_size(self) -> int:
        return VOCAB

    @property
    def special(self) -> SpecialTokenIds:
        return SpecialTokenIds(*range(256, 256 + len(SPECIALS)))

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        pos = 0
        while pos < len(text):
            for index, special in enumerate(SPECIALS):
                if text.startswith(special, pos):
                    ids.append(256 + index)
                    pos += len(special)
                    break
            else:
                ids.extend(text[pos].encode())
                pos += 1
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", "replace")

    def token_bytes(self, token_id: int) -> bytes:
        if 0 <= token_id < 256:
            return bytes([token_id])
        if 256 <= token_id < VOCAB:
            return SPECIALS[token_id - 256].encode()
        return b""

    def piece(self, token_id: int) -> str:
        return self.token_bytes(token_id).decode("latin-1")

    def token_id(self, piece: str) -> int | None:
        ids = self.encode(piece)
        return ids[0] if len(ids) == 1 else None

    def is_added(self, token_id: int) -> bool:
        return token_id >= 256

    def streaming_decoder(self) -> _Utf8Stream:
        return _Utf8Stream(self)
