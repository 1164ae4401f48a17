"""Tokenizer: text <-> token ids for DeepSeek V4 (byte-level BPE plus added tokens)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class SpecialTokenIds:
    """Ids of the control strings the chat protocol needs (docs/reference/chat-and-dsml.md §1.2)."""

    bos: int
    eos: int
    user: int
    assistant: int
    think_open: int
    think_close: int
    dsml: int


class StreamingDecoder(Protocol):
    """Turns ids into text one at a time without ever emitting a broken character.

    Bytes of an incomplete UTF-8 sequence are held until a later token completes
    them; the concatenation of every `feed` result and `flush` equals `decode(ids)`.
    """

    def feed(self, token_id: int) -> str: ...

    def flush(self) -> str:
        """Emit whatever is still held (an unfinished sequence becomes U+FFFD)."""
        ...


class Tokenizer(Protocol):
    @property
    def vocab_size(self) -> int: ...

    @property
    def special(self) -> SpecialTokenIds: ...

    def encode(self, text: str) -> list[int]:
        """Ids for `text` exactly as given: added tokens are recognized anywhere,
        nothing is stripped and no BOS is added."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """The text of `ids`; bytes that are not valid UTF-8 become U+FFFD."""
        ...

    def token_bytes(self, token_id: int) -> bytes:
        """The raw bytes token `token_id` stands for (b"" for an id out of range)."""
        ...

    def piece(self, token_id: int) -> str:
        """The token's vocabulary string (byte-level alphabet for BPE tokens)."""
        ...

    def token_id(self, piece: str) -> int | None:
        """The id of the vocabulary string `piece`, or None."""
        ...

    def is_added(self, token_id: int) -> bool:
        """True for added/special tokens (matched literally in text, never merged)."""
        ...

    def streaming_decoder(self) -> StreamingDecoder: ...
