"""Run a tiny HF model on fixed token sequences and record its reference logits.

Sequences start with BOS and continue with real-tokenizer ids of Manzoni's text (each from
a different place in the book). Full rows over the 129280-token vocabulary for every
position would be ~0.5 MB per token, so the fixture keeps, per sequence:

* ``logits_cols_<i>`` [L, C]: every position, at a fixed random subset of vocab columns.
  The head is linear in the final hidden state (width << C), so agreeing on these columns
  pins the hidden state down; the head weight itself is checked by the converter tests.
* ``logits_last_<i>`` [V]: the full row of the last position.
* ``topk_ids_<i>`` / ``topk_vals_<i>`` [L, 8]: the full-vocab top 8 (greedy token, gaps).
* ``max_abs_<i>`` [L]: max |logit| over the full vocab (the tolerance scale).
* ``tokens_<i>`` [L]: the input ids.
With ``full=True`` the whole [L, V] array is stored as ``logits_<i>`` as well.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
from transformers import DeepseekV4ForCausalLM

from tools.oracle.margins import MarginLog, record_margins
from tools.oracle.npz_io import write_npz
from tools.oracle.schedules import VOCAB_SIZE

BOS_ID = 0
TOP_K = 8
N_COLS = 2048
COLS_SEED = 20260101
DEFAULT_TEXT = Path(__file__).resolve().parents[2] / "data" / "promessi_sposi.txt"

I64 = npt.NDArray[np.int64]


def vocab_columns() -> I64:
    rng = np.random.default_rng(COLS_SEED)
    return np.sort(rng.choice(VOCAB_SIZE, size=N_COLS, replace=False)).astype(np.int64)


def token_sequences(lengths: tuple[int, ...], tokenizer_json: Path, text_path: Path) -> list[I64]:
    """BOS + real-tokenizer ids of the text, one sequence per length, distinct offsets.

    Without the text file (e.g. a checkout without the sibling shared/ data) the ids are drawn from
    the tokenizer's ordinary vocabulary with a fixed seed instead.
    """
    from tokenizers import Tokenizer

    seqs: list[I64] = []
    if text_path.is_file():
        tok = Tokenizer.from_file(str(tokenizer_json))
        text = text_path.read_text(encoding="utf-8")
        for i, length in enumerate(lengths):
            start = 3000 + 9973 * i
            ids = tok.encode(text[start : start + 8 * length + 64]).ids[: length - 1]
            if len(ids) != length - 1:
                raise ValueError(f"text too short for a {length}-token sequence")
            seqs.append(np.array([BOS_ID, *ids], dtype=np.int64))
    else:
        rng = np.random.default_rng(7)
        for length in lengths:
            drawn = rng.integers(100, 128000, size=length - 1)
            seqs.append(np.concatenate([[BOS_ID], drawn]).astype(np.int64))
    return seqs


@dataclass
class RunResult:
    arrays: dict[str, npt.NDArray[np.generic]]
    margins: MarginLog


def run_sequences(model: DeepseekV4ForCausalLM, seqs: list[I64], full: bool = False) -> RunResult:
    """One uncached forward per sequence; logits of every position, margins recorded."""
    cols = torch.from_numpy(vocab_columns())
    arrays: dict[str, npt.NDArray[np.generic]] = {"vocab_cols": cols.numpy()}
    with record_margins(model) as margins, torch.no_grad():
        for i, ids in enumerate(seqs):
            logits = model(input_ids=torch.from_numpy(ids)[None], use_cache=False).logits[0]
            logits = logits.float()
            top = logits.topk(TOP_K, dim=-1)
            arrays[f"tokens_{i}"] = ids
            arrays[f"logits_cols_{i}"] = logits[:, cols].numpy()
            arrays[f"logits_last_{i}"] = logits[-1].numpy()
            arrays[f"topk_ids_{i}"] = top.indices.numpy().astype(np.int64)
            arrays[f"topk_vals_{i}"] = top.values.numpy()
            arrays[f"max_abs_{i}"] = logits.abs().amax(dim=-1).numpy()
            if full:
                arrays[f"logits_{i}"] = logits.numpy()
    return RunResult(arrays, margins)


def save_reference(
    path: Path, result: RunResult, config_json: str, schedule: str, seed: int, text_source: str
) -> None:
    arrays = dict(result.arrays)
    summary = result.margins.summary()
    arrays["config_json"] = np.array(config_json)
    arrays["meta_json"] = np.array(
        json.dumps(
            {"schedule": schedule, "seed": seed, "text": text_source, **summary}, sort_keys=True
        )
    )
    arrays["n_sequences"] = np.array(sum(k.startswith("tokens_") for k in arrays), dtype=np.int64)
    write_npz(path, arrays)
