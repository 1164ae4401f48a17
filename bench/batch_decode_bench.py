"""N sessions decoded one step at a time: batched (one native pass for all, weights read
once per step) vs one session after another, side by side in one run.

Each session first prefills its own prompt; then every step appends one token to every
session. Prints, for each N, aggregate tokens/s both ways and their ratio, plus the
weight bytes a step reads (what batching shares).
Run: .venv/bin/python -m bench.batch_decode_bench --model M.gguf [--sessions 1,2,4,8]
[--steps 24] [--numerics ds4]  (a q2 tiny model: `ds4 gguf tiny --out M.gguf`)
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ds4.adapters.compute.cpu import open_cpu_runner
from ds4.ports.compute import ComputeSession, ModelRunner


def fresh(runner: ModelRunner, n: int, prompt_len: int, seed: int) -> list[ComputeSession]:
    rng = np.random.default_rng(seed)
    sessions = []
    for _ in range(n):
        s = runner.new_session(prompt_len + 256)
        s.prefill([int(t) for t in rng.integers(0, runner.hparams.n_vocab, prompt_len)])
        sessions.append(s)
    return sessions


def run(runner: ModelRunner, n: int, steps: int, batched: bool) -> float:
    """Aggregate tokens/s of `steps` decode steps over n sessions (greedy)."""
    sessions = fresh(runner, n, 64, seed=n)
    nxt = [[int(np.argmax(s.logits()))] for s in sessions]
    t0 = time.perf_counter()
    for _ in range(steps):
        if batched:
            out = runner.eval_batch(sessions, nxt)
        else:
            out = [s.eval(t[0]) for s, t in zip(sessions, nxt, strict=True)]
        nxt = [[int(np.argmax(logits))] for logits in out]
    return n * steps / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a GGUF model (e.g. a q2 tiny model)")
    ap.add_argument("--sessions", default="1,2,4,8", help="session counts to compare")
    ap.add_argument("--steps", type=int, default=24, help="decode steps per measurement")
    ap.add_argument("--numerics", default="ds4", choices=["ds4", "exact", "fp32"])
    args = ap.parse_args()
    runner = open_cpu_runner(args.model, numerics=args.numerics)
    run(runner, 1, 2, True)  # warm the kernels and the scratch arena
    print(f"{'N':>3} {'one by one t/s':>15} {'batched t/s':>12} {'ratio':>6}")
    for n in (int(x) for x in args.sessions.split(",")):
        alone = run(runner, n, args.steps, batched=False)
        together = run(runner, n, args.steps, batched=True)
        print(f"{n:>3} {alone:>15.1f} {together:>12.1f} {together / alone:>6.2f}")


if __name__ == "__main__":
    main()
