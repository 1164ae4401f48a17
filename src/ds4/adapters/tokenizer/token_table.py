"""What both BPE adapters share: id <-> string tables, special ids, decoding."""

from __future__ import annotations

from collections.abc import Sequence

from ds4.adapters.tokenizer.byte_level import from_symbols
from ds4.adapters.tokenizer.streaming_decoder import Utf8StreamingDecoder
from ds4.adapters.tokenizer.vocabulary import TokenizerDataError, Vocabulary
from ds4.domain.errors import Ds4Error
from ds4.ports.tokenizer import SpecialTokenIds

SPECIAL_STRINGS = {
    "bos": "<｜begin▁of▁sentence｜>",
    "eos": "<｜end▁of▁sentence｜>",
    "user": "<｜User｜>",
    "assistant": "<｜Assistant｜>",
    "think_open": "<think>",
    "think_close": "</think>",
    "dsml": "｜DSML｜",
}


class TokenTable:
    """Base of the Tokenizer adapters; subclasses supply `encode`."""

    def __init__(self, vocab: Vocabulary) -> None:
        self._vocab = vocab
        self._ids = {token: i for i, token in enumerate(vocab.tokens)}  # last id wins
        self._added_ids = frozenset(t.id for t in vocab.added)
        # Added tokens decode to their literal text; BPE tokens through the byte map.
        self._bytes = [
            token.encode("utf-8") if i in self._added_ids else from_symbols(token)
            for i, token in enumerate(vocab.tokens)
        ]
        self._special = self._find_special()

    def _find_special(self) -> SpecialTokenIds:
        found: dict[str, int] = {}
        for role, text in SPECIAL_STRINGS.items():
            token_id = self._ids.get(text)
            if token_id is None:
                raise TokenizerDataError(f"tokenizer has no {role} token {text!r}")
            found[role] = token_id
        return SpecialTokenIds(**found)

    @property
    def vocabulary(self) -> Vocabulary:
        return self._vocab

    @property
    def vocab_size(self) -> int:
        return len(self._vocab.tokens)

    @property
    def special(self) -> SpecialTokenIds:
        return self._special

    def token_bytes(self, token_id: int) -> bytes:
        if 0 <= token_id < len(self._bytes):
            return self._bytes[token_id]
        return b""

    def piece(self, token_id: int) -> str:
        if not 0 <= token_id < len(self._vocab.tokens):
            last = self.vocab_size - 1
            raise Ds4Error(f"token id {token_id} is outside the vocabulary (0..{last})")
        return self._vocab.tokens[token_id]

    def token_id(self, piece: str) -> int | None:
        return self._ids.get(piece)

    def is_added(self, token_id: int) -> bool:
        return token_id in self._added_ids

    def decode(self, ids: Sequence[int]) -> str:
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors="replace")

    def streaming_decoder(self) -> Utf8StreamingDecoder:
        return Utf8StreamingDecoder(self.token_bytes)
