"""A model-shaped GGUF with every tensor's data a hole (sparse), for shape checks, and
`ds4 gguf inspect` run as a subprocess on it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from ds4.adapters.gguf.writer import GGUFWriter
from ds4.apps import wiring
from ds4.domain.convert.hf_config import hparams_from_config
from ds4.domain.convert.plan import quant_plan
from ds4.domain.model.catalog import model_tensors
from ds4.domain.model.hparams import hparams_metadata


def write_sparse(path: Path, config: Mapping[str, object], *, wrong: str | None = None) -> Path:
    """The catalog's tensors for a config.json's shape (read by the converter's reader),
    data a hole; `wrong` names one tensor written with its first dimension halved."""
    hp = hparams_from_config(config)
    plan = quant_plan("q2", hp)
    with GGUFWriter(path) as w:
        for key, value in {**hparams_metadata(hp), **wiring.tokenizer_records(None)}.items():
            w.add_metadata(key, value)
        for spec in model_tensors(hp):
            if spec.optional and spec.layer is not None and hp.is_hash_layer(spec.layer):
                continue
            dims = spec.dims
            if spec.name == wrong:
                dims = (dims[0] // 2, *dims[1:])
            w.add_tensor(spec.name, dims, plan.tensor_type(spec, hp))
        w.finish(sparse=True)
    return path


def inspect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ds4", "gguf", "inspect", *args],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
