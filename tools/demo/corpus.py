"""The novel as clause-sized pieces, and chat examples cut from them.

The text (data/promessi_sposi.txt, public domain) is hard-wrapped; a paragraph
becomes one line. Pieces end at a clause or sentence mark, so an example's opening and
its continuation both end on punctuation, and every continuation ends a sentence when it
can: the end-of-turn token then follows a full stop, which is how the model learns to
stop by itself. The last HELD_OUT_FRACTION of the chapters' text is never trained on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ds4.ports.tokenizer import Tokenizer

HELD_OUT_FRACTION = 0.04
MIN_ANSWER = 8  # tokens
_ILLUSTRATION = re.compile(r"\[Illustrazione:.*?\]", re.S)
_HEADING = re.compile(r"^\s*CAPITOLO [A-Z]+\.\s*$", re.M)
# After a clause or sentence mark, or after a sentence mark that closes a quotation.
_SPLIT = re.compile(r"(?<=[.!?;:])\s+|(?<=[.!?]»)\s+")
_SENTENCE_END = re.compile(r"[.!?]»?$")


@dataclass(frozen=True)
class Piece:
    text: str
    tokens: int
    newline_after: bool  # the piece closes a paragraph

    @property
    def ends_sentence(self) -> bool:
        return _SENTENCE_END.search(self.text) is not None


@dataclass(frozen=True)
class Passage:
    """A user turn (the opening) and the answer the model should give (the continuation)."""

    opening: str
    continuation: str


def paragraphs(raw: str) -> list[str]:
    """The chapters (the archaic introduction left out), one paragraph per item."""
    text = raw[raw.index("CAPITOLO PRIMO.") :]
    text = _ILLUSTRATION.sub("", text).replace("_", "")
    text = _HEADING.sub("\n\n", text)
    out = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    return [p for p in out if p and p != "FINE."]


def pieces(paras: list[str], tokenizer: Tokenizer) -> list[Piece]:
    out: list[Piece] = []
    for para in paras:
        parts = [p for p in _SPLIT.split(para) if p]
        for i, part in enumerate(parts):
            out.append(Piece(part, len(tokenizer.encode(part)), i == len(parts) - 1))
    return out


def split_held_out(all_pieces: list[Piece]) -> tuple[list[Piece], list[Piece]]:
    """(train, held-out): the held-out part starts at a paragraph boundary."""
    total = sum(len(p.text) for p in all_pieces)
    seen = 0
    for i, piece in enumerate(all_pieces):
        seen += len(piece.text)
        if seen >= total * (1 - HELD_OUT_FRACTION) and piece.newline_after:
            return all_pieces[: i + 1], all_pieces[i + 1 :]
    raise ValueError("text too short to hold out a part")


def join(run: list[Piece]) -> str:
    text = ""
    for i, piece in enumerate(run):
        text += piece.text
        if i < len(run) - 1:
            text += "\n" if piece.newline_after else " "
    return text


def _take(src: list[Piece], start: int, want: int, cap: int, *, sentence: bool) -> int:
    """End index of a run from `start` with at least `want` tokens; with `sentence`, keep
    going (up to `cap` tokens) until the run ends a sentence."""
    end, tokens = start, 0
    while end < len(src) and (tokens < want or end == start):
        tokens += src[end].tokens
        end += 1
    if sentence:
        probe, extra = end, tokens
        while probe < len(src) and not src[probe - 1].ends_sentence:
            extra += src[probe].tokens
            probe += 1
            if extra > cap:
                break
        else:
            return probe
    return end


def passages(src: list[Piece], rng: np.random.Generator) -> list[Passage]:
    """Cut the whole run into consecutive (opening, continuation) pairs: every piece is
    used once. Openings are mostly one to three clauses (15-70 tokens), one in seven is a
    long page (120-300 tokens, so the ratio-128 layer has rows to read). A continuation
    is the rest of the sentence (at least MIN_ANSWER tokens, at most ~110): ending every
    answer at its first sentence end makes "a full stop, then end of turn" a rule the
    small model learns reliably, so it stops by itself."""
    out: list[Passage] = []
    start = 0
    while start < len(src) - 1:
        long_opening = rng.random() < 1 / 7
        want = int(rng.integers(120, 300) if long_opening else rng.integers(15, 70))
        mid = _take(src, start, want, 0, sentence=False)
        if mid >= len(src):
            break
        end = _take(src, mid, MIN_ANSWER, 110, sentence=True)
        out.append(Passage(join(src[start:mid]), join(src[mid:end])))
        start = end
    return out
