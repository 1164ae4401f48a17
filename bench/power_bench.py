"""`--power PERCENT`: decode rate and busy share at 100, 50 and 25 % (docs/power-and-prefix.md).

One engine (demo model by default), one session per run; each run decodes --tokens
greedy tokens after a short prompt with the duty cycle at one share, the shares taking
turns --rounds times. Prints the median rate per share, its ratio to 100 %, and the
busy share the cycle accounted (busy / (busy + paused)).

Run (from the repository root): .venv/bin/python -m bench.power_bench [--model M.gguf]
[--tokens 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ds4.apps.bootstrap import load_engine
from ds4.apps.options import EngineOptions
from ds4.domain.generation.loop import decode_tokens, prefill
from ds4.domain.sampling import GREEDY

SHARES = (100, 50, 25)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="models/demo.gguf")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    engine = load_engine(EngineOptions(args.model, backend="cpu", threads=args.threads, power=100))
    assert engine.duty is not None
    ids = engine.tokenizer.encode("Quel ramo del lago di Como, che volge a mezzogiorno")
    rates: dict[int, list[float]] = {p: [] for p in SHARES}
    busy: dict[int, list[float]] = {p: [] for p in SHARES}
    for _ in range(args.rounds):
        for share in SHARES:
            session = engine.new_session(len(ids) + args.tokens + 1)
            for _ in prefill(session, ids):
                pass
            engine.duty.percent = share  # resets the cycle's accounts
            t0 = time.perf_counter()
            n = len(list(decode_tokens(session, GREEDY, args.tokens, eos=-1)))
            rates[share].append(n / (time.perf_counter() - t0))
            b, p = engine.duty.accounts
            busy[share].append(b / (b + p) if b + p else 1.0)
    full = float(np.median(rates[100]))
    print("power  t/s (median)  x 100 %  busy share")
    for share in SHARES:
        rate = float(np.median(rates[share]))
        print(f"{share:4d} %  {rate:12.1f}  {rate / full:7.2f}  {np.median(busy[share]):10.2f}")


if __name__ == "__main__":
    main()
