"""Log-probabilities from raw logits: the top-k list `ds4 cli --dump-logprobs` writes,
and the log-probability and rank of any token, which `ds4 test-vectors` and
`ds4 gguf score` compare against recorded vectors (docs/test-vectors.md).

Computed in float64 over the finite logits: logprob = logit - logsumexp(logits).
Tokens are ordered by logit, ties by id (the first id wins), as argmax does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Ranked:
    """One token of a step: its logit, log-probability and 1-based rank."""

    id: int
    logit: float
    logprob: float
    rank: int


class StepLogprobs:
    """The log-softmax of one step's logits, with top-k and per-token lookups."""

    def __init__(self, logits: npt.NDArray[np.float32]) -> None:
        values = np.asarray(logits).astype(np.float64)
        finite = np.isfinite(values)
        self._values = values
        self._finite = finite
        self._sortable = np.where(finite, values, -np.inf)
        if finite.any():
            top = float(values[finite].max())
            self.log_norm = top + math.log(float(np.exp(values[finite] - top).sum()))
        else:
            self.log_norm = 0.0

    @property
    def vocab(self) -> int:
        return int(self._values.size)

    def top(self, k: int) -> list[Ranked]:
        """The k best tokens, best first (ties by id)."""
        order = np.lexsort((np.arange(self._values.size), -self._sortable))[:k]
        return [self._ranked(int(i), rank) for rank, i in enumerate(order, start=1)]

    def token(self, token_id: int) -> Ranked:
        """Any token's numbers; its rank counts the tokens ordered before it."""
        value = self._sortable[token_id]
        ahead = int(np.count_nonzero(self._sortable > value))
        ahead += int(np.count_nonzero(self._sortable[:token_id] == value))
        return self._ranked(token_id, ahead + 1)

    def logprob(self, token_id: int) -> float:
        if not self._finite[token_id]:
            return -math.inf
        return float(self._values[token_id] - self.log_norm)

    def _ranked(self, token_id: int, rank: int) -> Ranked:
        return Ranked(token_id, float(self._values[token_id]), self.logprob(token_id), rank)
