"""Eviction policies of the SSD-streaming expert cache on a recorded routing trace.

Runs a model on the cpu backend with --ssd-streaming (a cache that holds every expert,
so recording disturbs nothing), records which (layer, expert) each step uses while it
prefills a text and then decodes greedily, and replays the traces through LRU, the
decayed-frequency policy and Belady's optimum at budgets from 10% to 90% of the model's
experts. Prints hit rates side by side (docs/ssd-streaming.md has a run).

    PYTHONPATH=src python bench/expert_cache_policies.py [-m models/demo.gguf] [--text FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ds4.adapters.compute.cpu import open_cpu_runner
from ds4.apps.bootstrap import load_engine
from ds4.apps.options import EngineOptions
from ds4.domain.expert_cache import (
    CacheSpec,
    StreamingOptions,
    half_life_uses,
    optimal_hits,
    replay,
)

ROOT = Path(__file__).resolve().parents[1]


def quota_hit_rate(trace: list[int], slots: int, n_layer: int, n_expert: int) -> float:
    """Per-layer quotas: every layer owns slots // n_layer slots (the remainder to the
    first layers, at least one each), LRU inside a layer. Measured, not implemented in
    the cache (it did not beat `decayed`)."""
    quota = [max(1, slots // n_layer + (1 if i < slots % n_layer else 0)) for i in range(n_layer)]
    lists: list[list[int]] = [[] for _ in range(n_layer)]  # most recent last
    hits = 0
    for key in trace:
        lru = lists[key // n_expert]
        if key in lru:
            hits += 1
            lru.remove(key)
        elif len(lru) >= quota[key // n_expert]:
            lru.pop(0)
        lru.append(key)
    return hits / len(trace) if trace else 0.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("-m", "--model", default=str(ROOT / "models" / "demo.gguf"))
    p.add_argument("--text", default=str(ROOT / "README.md"), help="prompt text file")
    p.add_argument("--max-prompt-chars", type=int, default=6000)
    p.add_argument("--decode", type=int, default=512, help="greedy tokens after the prompt")
    args = p.parse_args()
    text = Path(args.text).read_text(encoding="utf-8")[: args.max_prompt_chars]
    ids = load_engine(EngineOptions(args.model, backend="reference")).tokenizer.encode(text)
    options = StreamingOptions(cache=CacheSpec(experts=1 << 24))
    runner = open_cpu_runner(args.model, streaming=options)
    assert runner.streaming is not None
    hp = runner.hparams
    total = hp.n_layer * hp.n_expert
    half_life = half_life_uses(options, hp.n_layer, hp.n_expert_used)
    session = runner.new_session(len(ids) + args.decode + 1)
    stop = runner.streaming.record_trace(1 << 22)
    logits = session.prefill(ids)
    prefill = stop()
    stop = runner.streaming.record_trace(1 << 22)
    for _ in range(args.decode):
        logits = session.eval(int(np.argmax(logits)))
    decode = stop()
    print(f"{Path(args.model).name}: {total} experts ({hp.n_layer} layers x {hp.n_expert}, "
          f"{hp.n_expert_used} used); {len(ids)} prompt tokens, {args.decode} decoded; "
          f"decayed half-life {half_life:g} uses")  # fmt: skip
    for name, trace in (("decode", decode), ("prefill + decode", prefill + decode)):
        print(f"\n{name}: {len(trace)} expert uses; hit rate by budget")
        print("budget  slots    lru  quotas  decayed  optimal")
        for pct in (10, 25, 50, 75, 90):
            slots = max(1, total * pct // 100)
            lru = replay(trace, slots, "lru").hit_rate
            quo = quota_hit_rate(trace, slots, hp.n_layer, hp.n_expert)
            dec = replay(trace, slots, "decayed", half_life).hit_rate
            opt = optimal_hits(trace, slots).hit_rate
            print(f"{pct:5d}%  {slots:5d}  {lru:.3f}   {quo:.3f}    {dec:.3f}    {opt:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
