"""Which tokens get rows, and the hash layers' token -> experts table.

A token gets an embedding and an output row when it occurs in any training example;
all other rows are exact zeros in the exported model (docs/demo-model.md). Hash layers
route seen tokens to K distinct experts drawn from the seed; unseen tokens all route to
experts 0..K-1 (they have zero embeddings, and a constant table compresses to nothing).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

from tools.demo.chat_examples import Example
from tools.demo.torch_model import DemoModel

I64 = npt.NDArray[np.int64]


def seen_tokens(epochs: list[list[Example]]) -> I64:
    seen: set[int] = set()
    for examples in epochs:
        for e in examples:
            seen.update(int(t) for t in e.ids)
    return np.asarray(sorted(seen), np.int64)


def row_index(seen: I64, vocab: int) -> I64:
    """Token id -> compact row (-1: no row)."""
    out = np.full(vocab, -1, np.int64)
    out[seen] = np.arange(len(seen))
    return out


def hash_routes(seen: I64, vocab: int, n_expert: int, k: int, seed: int, layer: int) -> I64:
    rng = np.random.default_rng([seed, 7919, layer])
    table = np.tile(np.arange(k, dtype=np.int64), (vocab, 1))
    keys = rng.random((len(seen), n_expert))
    table[seen] = np.argsort(keys, axis=1)[:, :k]
    return table


def install_hash_routes(model: DemoModel, seen: I64, seed: int) -> None:
    cfg = model.cfg
    for index, layer in enumerate(model.hf.model.layers):
        gate = layer.mlp.gate
        if layer.mlp.is_hash:
            table = hash_routes(
                seen, cfg.vocab_size, cfg.n_routed_experts, cfg.num_experts_per_tok, seed, index
            )
            gate.tid2eid.copy_(torch.from_numpy(table))
