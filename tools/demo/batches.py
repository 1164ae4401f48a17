"""Examples -> padded batches of similar length (little padding, deterministic order).

Every conversation starts at position 0 with BOS, as it does in the engine; examples
are never packed together (the compressors pool windows by absolute position).
Padding goes at the end with weight 0: causal attention and the compressors' causal
visibility keep it from influencing any real position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from tools.demo.chat_examples import Example


@dataclass(frozen=True)
class Batch:
    token_ids: torch.Tensor  # [B, S] int64, real ids (hash routing reads them)
    rows: torch.Tensor  # [B, S] int64, compact embedding/head rows
    weights: torch.Tensor  # [B, S] float32, weight of predicting token s
    real_tokens: int


def make_batches(
    examples: list[Example],
    row_of: npt.NDArray[np.int64],
    token_budget: int,
    rng: np.random.Generator,
) -> list[Batch]:
    order = sorted(range(len(examples)), key=lambda i: (len(examples[i].ids), i))
    groups: list[list[int]] = []
    current: list[int] = []
    for index in order:
        length = len(examples[index].ids)
        if current and length * (len(current) + 1) > token_budget:
            groups.append(current)
            current = []
        current.append(index)
    if current:
        groups.append(current)
    perm = rng.permutation(len(groups))
    return [_batch([examples[i] for i in groups[g]], row_of) for g in perm]


def _batch(examples: list[Example], row_of: npt.NDArray[np.int64]) -> Batch:
    length = max(len(e.ids) for e in examples)
    ids = np.zeros((len(examples), length), np.int64)
    ids[:] = examples[0].ids[-1]  # pad with an id that has a row (the end-of-turn token)
    weights = np.zeros((len(examples), length), np.float32)
    for i, e in enumerate(examples):
        ids[i, : len(e.ids)] = e.ids
        weights[i, : len(e.ids)] = e.weights
    rows = row_of[ids]
    if (rows < 0).any():
        raise ValueError("a batch holds a token without an embedding row")
    return Batch(
        torch.from_numpy(ids),
        torch.from_numpy(rows),
        torch.from_numpy(weights),
        sum(len(e.ids) for e in examples),
    )
