"""Pure-Python byte-level BPE: the executable reference for the native tokenizer.

encode = added-token split -> official pre-tokenizer -> byte-level symbols -> merges.
Merging applies the lowest-ranked adjacent pair first (leftmost among equals), one
merge at a time, as HF `tokenizers`' BPE model does.
"""

from __future__ import annotations

import heapq

from ds4.adapters.tokenizer.added_tokens import AddedTokenMatcher
from ds4.adapters.tokenizer.byte_level import to_symbols
from ds4.adapters.tokenizer.pretokenize import pretokenize
from ds4.adapters.tokenizer.token_table import TokenTable
from ds4.adapters.tokenizer.vocabulary import TokenizerDataError, Vocabulary
from ds4.domain.errors import Ds4Error

_CACHE_LIMIT = 200_000


def utf8_of(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Ds4Error(
            f"text is not valid Unicode: lone surrogate U+{ord(text[exc.start]):04X} "
            f"at character {exc.start}"
        ) from None


def merge_symbols(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """Apply merges to one word; a heap keeps long words (whitespace runs) n log n."""
    n = len(symbols)
    if n < 2:
        return symbols
    parts = list(symbols)
    nxt = list(range(1, n + 1))
    prv = list(range(-1, n - 1))
    alive = [True] * n
    heap = [(r, i) for i in range(n - 1) if (r := ranks.get((parts[i], parts[i + 1]))) is not None]
    heapq.heapify(heap)
    while heap:
        rank, i = heapq.heappop(heap)
        j = nxt[i] if alive[i] else n
        # Entries go stale when a neighbour merges; a pair still ranked `rank` is current.
        if j >= n or ranks.get((parts[i], parts[j])) != rank:
            continue
        parts[i] += parts[j]
        alive[j] = False
        nxt[i] = nxt[j]
        if nxt[i] < n:
            prv[nxt[i]] = i
        left = prv[i]
        if left >= 0 and (r := ranks.get((parts[left], parts[i]))) is not None:
            heapq.heappush(heap, (r, left))
        right = nxt[i]
        if right < n and (r := ranks.get((parts[i], parts[right]))) is not None:
            heapq.heappush(heap, (r, i))
    return [parts[i] for i in range(n) if alive[i]]


class ReferenceBpeTokenizer(TokenTable):
    def __init__(self, vocab: Vocabulary) -> None:
        super().__init__(vocab)
        self._ranks = {pair: rank for rank, pair in reversed(list(enumerate(vocab.merges)))}
        self._matcher = AddedTokenMatcher(vocab.added)
        self._cache: dict[str, list[int]] = {}
        for a, b in vocab.merges:
            if a not in self._ids or b not in self._ids or a + b not in self._ids:
                raise TokenizerDataError(f"merge {a!r} {b!r} uses a token not in the vocabulary")

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for segment in self._matcher.split(text):
            if isinstance(segment, int):
                ids.append(segment)
            else:
                for piece in pretokenize(segment):
                    ids.extend(self._word_ids(to_symbols(utf8_of(piece))))
        return ids

    def _word_ids(self, word: str) -> list[int]:
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        out: list[int] = []
        for symbol in merge_symbols(list(word), self._ranks):
            token_id = self._ids.get(symbol)
            if token_id is None:
                raise TokenizerDataError(f"byte symbol {symbol!r} is not in the vocabulary")
            out.append(token_id)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[word] = out
        return out
