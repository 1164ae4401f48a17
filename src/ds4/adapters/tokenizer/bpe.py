"""Byte-level BPE: the id tables both engines share, streaming decoding, the two engines.

`TokenTable` holds what the native and pure-Python engines share:
id <-> string tables, special ids, decoding. `ReferenceBpeTokenizer` is the
executable reference for the native tokenizer: encode = added-token split ->
official pre-tokenizer -> byte-level symbols -> merges. Merging applies the
lowest-ranked adjacent pair first (leftmost among equals), one merge at a time, as
HF `tokenizers`' BPE model does. `NativeBpeTokenizer` is the fast path
(ds4._native_tokenizer, native/tokenizer): Python resolves every string to an id once,
at construction; the C side then sees only bytes and ids: added-token split,
pre-tokenization and merges in one call.
"""

from __future__ import annotations

import codecs
import heapq
from collections.abc import Callable, Sequence
from typing import Any

from ds4 import _native_tokenizer  # type: ignore[attr-defined]
from ds4.adapters.tokenizer.pretokenize import (
    AddedTokenMatcher,
    from_symbols,
    pretokenize,
    to_symbols,
)
from ds4.adapters.tokenizer.vocabulary import TokenizerDataError, Vocabulary
from ds4.domain.errors import Ds4Error
from ds4.domain.tokenizer import BYTE_TO_CHAR
from ds4.ports.tokenizer import SpecialTokenIds

# --- Streaming decoding: incremental detokenization that never splits a UTF-8 character


class Utf8StreamingDecoder:
    """Feeds token bytes through an incremental UTF-8 decoder.

    An incomplete trailing sequence stays inside the decoder until the next token
    completes it; invalid bytes become U+FFFD exactly where a batch
    `bytes.decode("utf-8", "replace")` of the whole stream would put them.
    """

    def __init__(self, token_bytes: Callable[[int], bytes]) -> None:
        self._token_bytes = token_bytes
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token_id: int) -> str:
        return self._utf8.decode(self._token_bytes(token_id))

    def flush(self) -> str:
        return self._utf8.decode(b"", final=True)


# --- The id tables --------------------------------------------------------------------

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


# --- The pure-Python engine -----------------------------------------------------------

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


# --- The native engine ----------------------------------------------------------------

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
