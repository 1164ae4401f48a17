"""Checks on the contents of tensors the engines use as indices, not as weights.

A hash layer's `ffn_gate_tid2eid` (I32, [n_expert_used, n_vocab]) names the experts
each token id routes to (docs/reference/model.md §3.8); an entry outside 0..n_expert-1 would index
past the expert tensors, so the engines would fail on every request that reaches it
(docs/adr/0004-gguf-validation.md). Checked vectorized, a bounded chunk of rows at a
time: Flash's three tables are 3 MB each.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.model.problems import Problem
from ds4.ports.model_file import ModelFile

_CHUNK_ITEMS = 1 << 22  # entries compared at a time (a few MB of temporaries)


def tid2eid_name(layer: int) -> str:
    return f"blk.{layer}.ffn_gate_tid2eid.weight"


def check_tensor_data(
    hp: DeepSeekV4HParams, model: ModelFile, *, skip: Collection[str] = ()
) -> list[Problem]:
    """Problems in index tensors; `skip` names tensors already reported (wrong type/shape)."""
    out: list[Problem] = []
    for layer in range(hp.n_hash_layer):
        name = tid2eid_name(layer)
        if name in skip or name not in model.tensors:
            continue
        problem = _check_tid2eid(name, model.raw(name).view("<i4"), hp.n_expert)
        if problem is not None:
            out.append(problem)
    return out


def _check_tid2eid(name: str, table: npt.NDArray[Any], n_expert: int) -> Problem | None:
    """table: (n_vocab, n_expert_used) int32; the first entry outside 0..n_expert-1."""
    rows = max(1, _CHUNK_ITEMS // max(1, table.shape[-1]))
    for first in range(0, table.shape[0], rows):
        chunk = table[first : first + rows]
        bad = (chunk < 0) | (chunk >= n_expert)
        if bad.any():
            row, slot = (int(i) for i in np.argwhere(bad)[0])
            return Problem(
                name,
                f"token {first + row} routes to expert {int(chunk[row, slot])}, "
                f"outside 0..{n_expert - 1}",
            )
    return None
