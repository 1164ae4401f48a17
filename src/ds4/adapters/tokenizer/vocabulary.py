"""The tokenizer's data as plain values: id-ordered token strings, ranked merges, added tokens."""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.errors import Ds4Error


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
