"""Pin the demo model's greedy continuations per backend and numerics.

    python -m tools.demo.make_goldens   # rewrites tests/integration/demo/goldens.json

The openings are the first held-out passages (never trained on). Each engine
configuration's greedy tokens are stored, and for every pair of configurations the
first step where they part (null: they never do within GREEDY_STEPS), which
docs/demo-model.md reports. tests/integration/demo/test_goldens.py recomputes all of it.
"""

from __future__ import annotations

import json

from ds4.apps import wiring
from ds4.apps.bootstrap import load_engine
from ds4.apps.options import EngineOptions
from tools.demo.corpus import paragraphs, passages, pieces, split_held_out
from tools.demo.files import DEMO, GOLDENS, NOVEL, sha256
from tools.demo.greedy import chat_ids, greedy

GREEDY_STEPS = 40
N_OPENINGS = 3
CONFIGS = ("cpu/exact", "cpu/ds4", "cpu/fp32", "reference/ds4", "reference/fp32")
OPENINGS_SEED = 11


def held_out_openings() -> list[str]:
    import numpy as np

    tokenizer = wiring.tokenizer(None)
    _, held = split_held_out(pieces(paragraphs(NOVEL.read_text(encoding="utf-8")), tokenizer))
    found = passages(held, np.random.default_rng(OPENINGS_SEED))
    return [p.opening for p in found if len(p.opening) < 400][:N_OPENINGS]


def run_config(config: str, openings: list[str]) -> list[list[int]]:
    backend, numerics = config.split("/")
    engine = load_engine(EngineOptions(str(DEMO), backend=backend, numerics=numerics, threads=1))
    eos = engine.tokenizer.special.eos
    return [
        greedy(engine.runner, chat_ids(engine.tokenizer, o), GREEDY_STEPS, eos) for o in openings
    ]


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def parting(runs: dict[str, list[list[int]]]) -> dict[str, list[int | None]]:
    out: dict[str, list[int | None]] = {}
    for i, a in enumerate(CONFIGS):
        for b in CONFIGS[i + 1 :]:
            out[f"{a} vs {b}"] = [
                first_difference(x, y) for x, y in zip(runs[a], runs[b], strict=True)
            ]
    return out


def main() -> int:
    openings = held_out_openings()
    runs = {config: run_config(config, openings) for config in CONFIGS}
    tokenizer = wiring.tokenizer(str(DEMO))
    data = {
        "model_sha256": sha256(DEMO),
        "greedy_steps": GREEDY_STEPS,
        "openings": openings,
        "runs": runs,
        "text": {c: [tokenizer.decode(ids) for ids in r] for c, r in runs.items()},
        "parting": parting(runs),
    }
    GOLDENS.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(data["parting"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
