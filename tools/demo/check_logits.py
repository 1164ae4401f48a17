"""Our engine against the torch model on held-out conversations (docs/demo-model.md).

For each engine configuration, every position's logits over the whole vocabulary are
compared with transformers' forward pass on the same exported weights; the error is
max |Δlogit| over a sequence divided by max(1, max |logit|) there, the oracle tests'
measure (tests/integration/engine/test_oracle_agreement.py). `reference`/`fp32`
multiplies dequantized weights in f32 and is the like-for-like comparison; the other
configurations add the engine's own rounding (int8 activations, FP8/FP4 caches) and
show how far that moves the logits, and whether greedy choices change.

    python -m tools.demo.check_logits --checkpoint DIR --gguf models/demo.gguf
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ds4.apps.bootstrap import load_engine
from ds4.apps.options import EngineOptions
from tools.demo.reference_torch import all_logits, load_reference

CONFIGS = (("reference", "fp32"), ("cpu", "fp32"), ("reference", "ds4"), ("cpu", "ds4"),
           ("cpu", "exact"))  # fmt: skip


@dataclass(frozen=True)
class Agreement:
    backend: str
    numerics: str
    max_rel_err: float
    greedy_agree: float  # fraction of positions with the same arg-max

    def line(self) -> str:
        return (
            f"{self.backend:9} {self.numerics:5}  max rel |dlogit| {self.max_rel_err:.2e}  "
            f"greedy agreement {100 * self.greedy_agree:.1f}%"
        )


def compare(
    gguf: Path, torch_logits: list[npt.NDArray[np.float32]], seqs: list[list[int]]
) -> list[Agreement]:
    out = []
    for backend, numerics in CONFIGS:
        engine = load_engine(
            EngineOptions(str(gguf), backend=backend, numerics=numerics, threads=1)
        )
        worst, same, total = 0.0, 0, 0
        for ids, ref in zip(seqs, torch_logits, strict=True):
            ours = engine.runner.new_session(len(ids)).prefill(ids, all_logits=True)
            scale = np.maximum(1.0, np.abs(ref).max(axis=1))
            worst = max(worst, float((np.abs(ours - ref).max(axis=1) / scale).max()))
            same += int((ours.argmax(axis=1) == ref.argmax(axis=1)).sum())
            total += len(ids)
        out.append(Agreement(backend, numerics, worst, same / total))
    return out


def check(checkpoint: Path, gguf: Path, seqs: list[list[int]]) -> list[Agreement]:
    model = load_reference(checkpoint)
    torch_logits = [all_logits(model, ids) for ids in seqs]
    return compare(gguf, torch_logits, seqs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.demo.check_logits")
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--gguf", type=Path, required=True)
    parser.add_argument("--tokens", type=Path, required=True, help="JSON list of id lists")
    args = parser.parse_args(argv)
    import json

    seqs = json.loads(args.tokens.read_text())
    for agreement in check(args.checkpoint, args.gguf, seqs):
        print(agreement.line(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
