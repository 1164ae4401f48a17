"""Start training from a shipped demo model instead of random weights.

Every tensor of the torch model is read back from the GGUF files (decoded exactly:
the shipped weights sit on their GGML grid, export.py), then the rows that file did
not have are filled in: a token seen now but not then (its stored embedding row is
all zeros) gets a fresh random embedding and output row, and in the hash layers fresh
experts drawn from the seed (the old tokens keep their routes, so what the file
learned stays where it was).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from ds4.apps import wiring
from ds4.domain.convert.checkpoint_sources import gguf_target
from ds4.domain.gguf.ggml_types import GGMLType
from tools.demo import export
from tools.demo.torch_model import INIT_STD, DemoModel

_FLOAT = {GGMLType.F32: np.float32, GGMLType.F16: np.float16}


def _read(names: list[str], path: Path) -> dict[str, npt.NDArray[Any]]:
    model = wiring.open_model_file(str(path))
    dequantizer = wiring.dequantizer("numpy")
    out: dict[str, npt.NDArray[Any]] = {}
    try:
        for name in names:
            target = gguf_target(name)
            if target is None or target.gguf_name not in model.tensors:
                raise KeyError(f"{path}: no tensor for {name}")
            info = model.tensors[target.gguf_name]
            raw = model.raw(target.gguf_name)
            value: npt.NDArray[Any]
            if info.ggml_type is GGMLType.I32:
                value = raw.view(np.int32).reshape(info.numpy_shape).astype(np.int64)
            elif info.ggml_type in _FLOAT:
                value = raw.view(_FLOAT[info.ggml_type]).reshape(info.numpy_shape)
            else:
                value = dequantizer.dequantize(raw, info.ggml_type).reshape(info.numpy_shape)
            if target.expert is not None:
                value = value[target.expert]
            out[name] = np.array(value, dtype=np.float32 if value.dtype.kind == "f" else np.int64)
    finally:
        model.close()
    return out


def rows_of(main: Path) -> npt.NDArray[np.int64]:
    """The tokens that have an embedding row in a demo GGUF (a nonzero row)."""
    embed = _read(["embed.weight"], main)["embed.weight"]
    return np.flatnonzero(np.abs(embed).sum(axis=1) > 0).astype(np.int64)


def load(model: DemoModel, seen: npt.NDArray[np.int64], main: Path, mtp: Path, seed: int) -> int:
    """Load both files into `model`; returns how many seen tokens got new rows."""
    hub = _read(list(export.main_hub(model, seen)), main)
    old_rows = np.abs(hub["embed.weight"]).sum(axis=1) > 0
    export.load_main(model, hub, seen)
    export.load_mtp(model, _read(list(export.mtp_hub(model)), mtp))
    fresh = np.flatnonzero(~old_rows[seen])
    rng = np.random.default_rng([seed, 4242])
    d = model.cfg.hidden_size
    with torch.no_grad():
        index = torch.from_numpy(fresh)
        model.embed[index] = torch.from_numpy(
            rng.standard_normal((len(fresh), d)) * INIT_STD
        ).float()
        model.head[index] = torch.from_numpy(
            rng.standard_normal((len(fresh), d)) * INIT_STD
        ).float()
        new_tokens = seen[fresh]
        cfg = model.cfg
        for layer_index, layer in enumerate(model.hf.model.layers):
            if not layer.mlp.is_hash:
                continue
            keys = np.random.default_rng([seed, 7919, layer_index, 1]).random(
                (len(new_tokens), cfg.n_routed_experts)
            )
            routes = np.argsort(keys, axis=1)[:, : cfg.num_experts_per_tok]
            table = layer.mlp.gate.tid2eid
            table[torch.from_numpy(new_tokens)] = torch.from_numpy(routes).to(table.dtype)
    return len(fresh)
