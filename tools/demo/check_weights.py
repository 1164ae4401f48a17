"""Every tensor of the two GGUFs against the checkpoint the converter read.

No engine runs the MTP block yet (docs/reference/model.md §3.12), so its logits cannot
be compared; instead every stored value is decoded back and compared with the snapped
torch weights (export.py), for the main file and the MTP file alike. Expected: no
difference at all, since the weights were snapped to their GGML grid before conversion.

    python -m tools.demo.check_weights --checkpoint DIR --gguf models/demo.gguf
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from safetensors.numpy import load_file

from ds4.apps import wiring
from ds4.domain.convert.checkpoint_sources import gguf_target
from ds4.domain.gguf.ggml_types import GGMLType

_FLOAT = {GGMLType.F32: np.float32, GGMLType.F16: np.float16}


def max_differences(checkpoint: Path, ggufs: list[Path]) -> dict[str, float]:
    """Per GGUF file name: max |stored - checkpoint| over all its tensors."""
    hub = load_file(str(checkpoint / "model.safetensors"))
    dequantizer = wiring.dequantizer("numpy")
    out: dict[str, float] = {}
    for path in ggufs:
        model = wiring.open_model_file(str(path))
        worst = 0.0
        for name, value in hub.items():
            target = gguf_target(name)
            if target is None or target.gguf_name not in model.tensors:
                continue
            info = model.tensors[target.gguf_name]
            raw = model.raw(target.gguf_name)
            stored: npt.NDArray[Any]
            if info.ggml_type is GGMLType.I32:
                stored = raw.view(np.int32).reshape(info.numpy_shape)
            elif info.ggml_type in _FLOAT:
                stored = raw.view(_FLOAT[info.ggml_type]).reshape(info.numpy_shape)
            else:
                stored = dequantizer.dequantize(raw, info.ggml_type).reshape(info.numpy_shape)
            if target.expert is not None:
                stored = stored[target.expert]
            diff = np.abs(stored.astype(np.float64) - value.astype(np.float64)).max()
            worst = max(worst, float(diff))
        out[path.name] = worst
        model.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.demo.check_weights")
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--gguf", type=Path, nargs="+", required=True)
    args = parser.parse_args(argv)
    for name, worst in max_differences(args.checkpoint, args.gguf).items():
        print(f"{name}: max |stored - checkpoint| = {worst:g}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
