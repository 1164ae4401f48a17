"""Token bytes to token ids: recorded tokens are matched by their bytes, never by id
(the recording model's ids need not be ours)."""

from __future__ import annotations

from ds4.ports.tokenizer import Tokenizer


class TokenIndex:
    def __init__(self, tokenizer: Tokenizer) -> None:
        by_bytes: dict[bytes, list[int]] = {}
        for token_id in range(tokenizer.vocab_size):
            raw = tokenizer.token_bytes(token_id)
            if raw:
                by_bytes.setdefault(raw, []).append(token_id)
        # Ordinary tokens before added ones: a text with these bytes is fed as the former.
        self._ids = {
            raw: tuple(sorted(ids, key=lambda i: (tokenizer.is_added(i), i)))
            if len(ids) > 1
            else (ids[0],)
            for raw, ids in by_bytes.items()
        }

    def ids(self, raw: bytes) -> tuple[int, ...]:
        """Every id whose bytes are `raw` (usually one), ordinary tokens first."""
        return self._ids.get(raw, ())

    def natural(self, raw: bytes) -> int | None:
        """The id a text with these bytes is fed as; None when no token has them."""
        ids = self._ids.get(raw, ())
        return ids[0] if ids else None
