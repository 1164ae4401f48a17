"""Held-out quality: per-token cross-entropy of the continuations, next to a unigram model.

Both are measured on the same tokens: the continuation (answer) tokens of the held-out
examples, the end-of-turn token included. The unigram model is fit on the tokens the
model trained on (every weighted token of one epoch), with add-one smoothing over the
whole vocabulary; the held-out text's own unigram entropy is printed as well (the best
any unigram model could do on it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tools.demo.chat_examples import Example

# ids -> [len(ids), V] logits after every position (the torch model, or an engine)
LogitsOf = Callable[[list[int]], npt.NDArray[np.float32]]


@dataclass(frozen=True)
class Quality:
    tokens: int
    model_ce: float
    unigram_ce: float
    unigram_self_entropy: float

    def lines(self) -> list[str]:
        return [
            f"held-out continuation tokens: {self.tokens}",
            f"model cross-entropy:          {self.model_ce:.3f} nats/token",
            f"unigram (train-fit) CE:       {self.unigram_ce:.3f} nats/token",
            f"unigram (held-out's own):     {self.unigram_self_entropy:.3f} nats/token",
        ]


def _log_softmax_at(
    logits: npt.NDArray[np.float64], targets: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    top = logits.max(axis=1, keepdims=True)
    lse = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
    return np.asarray(logits[np.arange(len(targets)), targets] - lse, np.float64)


def measure(
    logits_of: LogitsOf, held_out: list[Example], train: list[Example], vocab: int
) -> Quality:
    counts = np.ones(vocab, np.float64)
    for e in train:
        np.add.at(counts, e.ids[e.weights > 0], 1.0)
    unigram = np.log(counts / counts.sum())
    nll: list[float] = []
    targets_all: list[int] = []
    for e in held_out:
        logits = logits_of([int(t) for t in e.ids])
        where = np.flatnonzero(e.answer)  # positions of answer tokens
        lp = _log_softmax_at(logits[where - 1].astype(np.float64), e.ids[where].astype(np.int64))
        nll += (-lp).tolist()
        targets_all += e.ids[where].tolist()
    targets = np.asarray(targets_all, np.int64)
    own = np.bincount(targets, minlength=vocab).astype(np.float64)
    p_own = own[targets] / own.sum()
    return Quality(
        tokens=len(targets),
        model_ce=float(np.mean(nll)),
        unigram_ce=float(-unigram[targets].mean()),
        unigram_self_entropy=float(-np.log(p_own).mean()),
    )
