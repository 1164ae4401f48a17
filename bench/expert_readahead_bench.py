"""Router-predicted read-ahead of the SSD-streaming expert cache, on and off.

Runs a model on the cpu backend with --ssd-streaming at budgets from 10% to 75% of its
experts, prefills a text and decodes greedily, once without read-ahead and once with
it (the next layer's router applied to the current layer's FFN input predicts the next
layer's experts; a hash-routed next layer is predicted from the token exactly). Prints,
over the decode window, the prediction's precision and recall, the cache's hit rate,
disk bytes and stall time per token, and how many experts the read-ahead loaded and how
many of those were used, side by side (docs/ssd-streaming.md has a run). Hit counts
with read-ahead depend on how the background reads interleave with the forward, so
each configuration runs --repeats times.

    PYTHONPATH=src python -m bench.expert_readahead_bench [-m models/demo.gguf]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from ds4.adapters.compute.cpu import open_cpu_runner
from ds4.apps.bootstrap import load_engine
from ds4.apps.options import EngineOptions
from ds4.domain.expert_cache import CacheSpec, ExpertCacheStats, StreamingOptions

ROOT = Path(__file__).resolve().parents[1]


def run(model: str, prompt: list[int], decode: int, slots: int, readahead: int,
        threads: int) -> tuple[ExpertCacheStats, float]:  # fmt: skip
    """(the decode window's counters, its tokens/s)."""
    options = StreamingOptions(cache=CacheSpec(experts=slots), readahead=readahead)
    runner = open_cpu_runner(model, threads=threads, streaming=options)
    assert runner.streaming is not None
    session = runner.new_session(len(prompt) + decode + 2)
    logits = session.prefill(prompt)
    before = runner.streaming.stats()
    t0 = time.perf_counter()
    for _ in range(decode):
        logits = session.eval(int(np.argmax(logits)))
    tps = decode / (time.perf_counter() - t0)
    return runner.streaming.stats().since(before), tps


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("-m", "--model", default=str(ROOT / "models" / "demo.gguf"))
    p.add_argument("--text", default=str(ROOT / "README.md"), help="prompt text file")
    p.add_argument("--max-prompt-chars", type=int, default=1500)
    p.add_argument("--decode", type=int, default=256, help="greedy tokens after the prompt")
    p.add_argument("--budgets", default="10,25,50,75", help="percent of the experts")
    p.add_argument("--readahead", default="",
                   help="comma-separated read-ahead counts to compare, 0 = off "
                   "(default: 0 and the model's n_used)")  # fmt: skip
    p.add_argument("--repeats", type=int, default=2, help="runs per configuration")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--random-prompt", type=int, default=0, metavar="N",
                   help="use N random token ids as the prompt instead of --text (for files "
                   "without a usable tokenizer, e.g. the SSD bench's Flash-shaped one; "
                   "default 0: the text)")  # fmt: skip
    args = p.parse_args()
    if not 1 <= args.decode <= 1 << 16 or not 1 <= args.repeats <= 20:
        p.error("--decode must be in 1..65536 and --repeats in 1..20")
    probe = open_cpu_runner(args.model, threads=1)
    hp = probe.hparams
    del probe
    if args.random_prompt:
        rng = np.random.default_rng(5)
        prompt = [int(t) for t in rng.integers(0, hp.n_vocab, args.random_prompt)]
    else:
        text = Path(args.text).read_text(encoding="utf-8")[: args.max_prompt_chars]
        prompt = load_engine(EngineOptions(args.model, backend="reference")).tokenizer.encode(text)
    try:
        counts = [int(c) for c in args.readahead.split(",")] if args.readahead else []
    except ValueError:
        p.error(f"--readahead {args.readahead!r}: comma-separated whole numbers")
    counts = counts or [0, hp.n_expert_used]
    if any(not 0 <= c <= hp.n_expert for c in counts):
        p.error(f"--readahead: each count must be in 0..{hp.n_expert}")
    total = hp.n_layer * hp.n_expert
    print(f"{args.model}: {hp.n_layer} layers x {hp.n_expert} experts, {hp.n_expert_used} "
          f"used, {hp.n_hash_layer} hash-routed; {len(prompt)} prompt tokens, {args.decode} "
          f"decode tokens, read-ahead {args.readahead or counts}; chance precision "
          f"{hp.n_expert_used / hp.n_expert:.3f}\n")  # fmt: skip
    print("| budget | slots | read-ahead | precision | recall | hit rate | disk KiB / token "
          "| stall ms / token | loaded ahead / used | t/s |\n|---:|---:|---|---:|---:|---:|"
          "---:|---:|---:|---:|")  # fmt: skip
    for pct in (int(b) for b in args.budgets.split(",")):
        slots = max(1, total * pct // 100)
        for readahead in counts:
            for _ in range(args.repeats):
                st, tps = run(args.model, prompt, args.decode, slots, readahead, args.threads)
                n = args.decode
                pred = (f"{st.prediction_precision:.3f} | {st.prediction_recall:.3f}"
                        if readahead else "– | –")  # fmt: skip
                print(f"| {pct}% | {slots} | {readahead or 'off'} | {pred} | "
                      f"{st.hit_rate:.3f} | {st.bytes_read / n / 1024:.1f} | "
                      f"{st.stall_seconds * 1e3 / n:.3f} | {st.readahead_loaded} / "
                      f"{st.readahead_used} | {tps:.1f} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
