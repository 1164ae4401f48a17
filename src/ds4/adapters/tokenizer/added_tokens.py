"""Find added tokens in raw text the way HF `tokenizers` does for this tokenizer.json.

Two passes, each leftmost-longest: `early` tokens over the whole text, then the
other added tokens inside the gaps between early matches. Text between matches
goes on to pre-tokenization and BPE.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ds4.adapters.tokenizer.vocabulary import AddedToken

Segment = str | int  # plain text, or the id of a matched added token


def _alternation(tokens: Iterable[AddedToken]) -> tuple[re.Pattern[str] | None, dict[str, int]]:
    ids = {t.content: t.id for t in tokens}
    if not ids:
        return None, ids
    # Longest first: at the leftmost matching position `re` takes the first alternative.
    ordered = sorted(ids, key=len, reverse=True)
    return re.compile("|".join(re.escape(s) for s in ordered)), ids


class AddedTokenMatcher:
    def __init__(self, added: Iterable[AddedToken]) -> None:
        tokens = list(added)
        self._passes = [
            _alternation(t for t in tokens if t.early),
            _alternation(t for t in tokens if not t.early),
        ]

    def split(self, text: str) -> list[Segment]:
        segments: list[Segment] = [text] if text else []
        for pattern, ids in self._passes:
            if pattern is None:
                continue
            out: list[Segment] = []
            for seg in segments:
                if isinstance(seg, int):
                    out.append(seg)
                    continue
                pos = 0
                for match in pattern.finditer(seg):
                    if match.start() > pos:
                        out.append(seg[pos : match.start()])
                    out.append(ids[match.group()])
                    pos = match.end()
                if pos < len(seg):
                    out.append(seg[pos:])
            segments = out
        return segments
