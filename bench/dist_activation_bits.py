"""`--dist-activation-bits` against 32 bits over a long teacher-forced sequence: the same
text through the same layer split with hidden states sent at 32, 16 and 8 bits, every
position's logits compared with the 32-bit run's (max |Δlogit|, the share of positions
whose argmax agrees) and the bytes per token per boundary (docs/distributed.md).

The workers run in this process (the transport's encode and decode are the same code
Ray workers run; only the process boundary is left out, and with it Ray's start-up).
Run: .venv/bin/python -m bench.dist_activation_bits [--model models/demo.gguf]
[--tokens 1024] [--ranges 4] [--numerics exact]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ds4.adapters.compute.ray import ray_runner
from ds4.adapters.compute.ray.stage import LayerStage, StageSpec
from ds4.adapters.gguf.model_files import load_model
from ds4.apps.wiring import tokenizer_from_model
from ds4.domain.dist_transport import ACTIVATION_BITS, bytes_per_token
from ds4.domain.distributed import parse_target
from ds4.domain.errors import Ds4Error

TEXT = Path(__file__).resolve().parents[1] / "data" / "promessi_sposi.txt"


class Direct:
    """The layer stages called in this process, results as they are."""

    def __init__(self, specs: Sequence[StageSpec], _nodes: Sequence[str | None]) -> None:
        self.specs = list(specs)
        self.stages = [LayerStage(s) for s in self.specs]
        for stage in self.stages:
            if stage.error is not None:
                raise Ds4Error(stage.error)

    @property
    def ranges(self) -> Sequence[range]:
        return [s.layers for s in self.specs]

    def submit(self, k: int, method: str, *args: Any, num_returns: int = 1) -> Any:
        return getattr(self.stages[k], method)(*args)

    def get(self, k: int, pending: Any) -> Any:
        return pending

    def describe(self, k: int) -> str:
        return f"layers {self.specs[k].layers}"

    def replace(self, k: int) -> None:
        raise Ds4Error("no worker is lost in this bench")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="models/demo.gguf")
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--ranges", type=int, default=4)
    ap.add_argument("--numerics", default="exact")
    args = ap.parse_args()
    model, hp = load_model(args.model)
    text = TEXT.read_text(encoding="utf-8")
    ids = tokenizer_from_model(model).encode(text)[: args.tokens]
    ctx = len(ids) + 8
    logits = {}
    for bits in ACTIVATION_BITS:
        runner = ray_runner(
            model, hp, target=parse_target(f"local:{args.ranges}"), numerics=args.numerics,
            threads=2, activation_bits=bits, make_stages=Direct,
        )  # fmt: skip
        logits[bits] = runner.new_session(ctx).prefill(ids, all_logits=True)
    base = logits[32]
    print(f"{args.model}: {len(ids)} tokens of {TEXT.name}, {args.ranges} ranges "
          f"({args.ranges + 1} encoded hops), --numerics {args.numerics}")  # fmt: skip
    print("| bits | B/token/boundary | max abs dlogit | mean abs dlogit | argmax agrees |")
    print("|---|---|---|---|---|")
    top = base.argmax(axis=-1)
    spread = float(base.max() - base.min())
    for bits in ACTIVATION_BITS:
        d = np.abs(logits[bits] - base)
        agree = float(np.mean(logits[bits].argmax(axis=-1) == top))
        size = bytes_per_token(hp.n_hc, hp.n_embd, bits)
        print(f"| {bits} | {size:,} | {d.max():.4g} | {d.mean():.4g} | {100 * agree:.2f} % |")
    print(f"(logit range at 32 bits: {spread:.4g})")


if __name__ == "__main__":
    main()
