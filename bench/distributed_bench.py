"""A model split across Ray workers (`--distributed local:N`) against one process, side
by side in one run: prefill tokens/s, decode ms per token, the split's overhead per
token, and the hidden-state bytes that cross between processes per token.

Both transports are measured: `refs` (the chain is submitted at once, each range's
output handed on as a Ray object ref) and `values` (the coordinator fetches each
output and passes it to the next call). Greedy decode from the same prompt; the split
runs must produce the single process's tokens (checked, not timed).
Run: .venv/bin/python -m bench.distributed_bench --model M.gguf [--workers 2]
[--prompt 256] [--tokens 48] [--piece 64] [--numerics ds4]
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ds4.adapters.compute.cpu import cpu_runner
from ds4.adapters.compute.ray import RayRunner, ray_runner
from ds4.adapters.compute.ray.pipeline import Transport
from ds4.adapters.gguf.model_files import load_model
from ds4.domain.distributed import parse_target
from ds4.ports.compute import ModelRunner

FLASH_HC_BYTES = 4 * 4096 * 4  # n_hc x n_embd x float32 (docs/distributed.md)


@dataclass
class Result:
    label: str
    prefill_tps: float
    decode_ms: float
    tokens: list[int]
    bytes_per_token: float | None = None  # hidden-state bytes between processes


def measure(runner: ModelRunner, label: str, prompt: list[int], steps: int, repeat: int) -> Result:
    """Best of `repeat` runs (the machine may be shared), after a warm-up."""
    session = runner.new_session(len(prompt) + steps + 8)
    session.prefill(prompt)  # warm-up: every weight page touched, first remote calls made
    for t in prompt[:4]:
        session.eval(t)
    best_prefill, best_decode = float("inf"), float("inf")
    for _ in range(repeat):
        session.invalidate()
        t0 = time.perf_counter()
        last = session.prefill(prompt)
        best_prefill = min(best_prefill, time.perf_counter() - t0)
        sent0 = runner.pipeline.bytes_sent if isinstance(runner, RayRunner) else 0
        tokens = []
        t0 = time.perf_counter()
        for _ in range(steps):
            tokens.append(int(np.argmax(last)))
            last = session.eval(tokens[-1])
        best_decode = min(best_decode, time.perf_counter() - t0)
    per_token = None
    if isinstance(runner, RayRunner):
        per_token = (runner.pipeline.bytes_sent - sent0) / steps
    return Result(label, len(prompt) / best_prefill, 1000 * best_decode / steps, tokens, per_token)


class _Echo:
    """A range that does no work: what is left is the transport."""

    def forward(self, x: np.ndarray) -> tuple[np.ndarray, int]:
        return np.array(x), 0  # a copy, as a worker makes its writable input


def transport_only(workers: int, rows: int, iters: int) -> tuple[float, float]:
    """Median ms per pass of a Flash-sized hidden state (rows x 4 x 4096 float32)
    through `workers` do-nothing actors: (refs, values), measured interleaved."""
    import ray

    echo: Any = ray.remote(num_cpus=0)(_Echo)
    actors: list[Any] = [echo.remote() for _ in range(workers)]
    x = np.zeros((rows, 4, 4096), np.float32)
    timings: dict[str, list[float]] = {"refs": [], "values": []}
    for i in range(iters + 2):
        for mode in ("refs", "values"):
            t0 = time.perf_counter()
            out: Any = x
            for actor in actors:
                y, report = actor.forward.options(num_returns=2).remote(out)
                out = y if mode == "refs" else ray.get(y)
                ray.get(report)  # the hash report, waited for as the pipeline does
            np.asarray(ray.get(out) if mode == "refs" else out)
            if i >= 2:  # the first passes warm up both paths
                timings[mode].append(time.perf_counter() - t0)
    for actor in actors:
        ray.kill(actor)
    return (1000 * float(np.median(timings["refs"])), 1000 * float(np.median(timings["values"])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a GGUF model (e.g. models/demo.gguf)")
    ap.add_argument("--workers", type=int, default=2, help="layer ranges (local:N)")
    ap.add_argument("--prompt", type=int, default=256, help="prompt tokens")
    ap.add_argument("--tokens", type=int, default=48, help="greedy decode steps")
    ap.add_argument("--piece", type=int, default=64, help="pipelined prefill piece")
    ap.add_argument("--numerics", default="ds4", choices=["ds4", "exact", "fp32"])
    ap.add_argument("--repeat", type=int, default=3, help="runs per mode (best is shown)")
    ap.add_argument("--transport-iters", type=int, default=200, help="passes per transport")
    args = ap.parse_args()

    model, hp = load_model(args.model)
    cores = os.cpu_count() or 1
    rng = np.random.default_rng(0)
    prompt = [int(t) for t in rng.integers(100, min(hp.n_vocab, 6000), args.prompt)]
    results = [measure(cpu_runner(model, hp, numerics=args.numerics, threads=cores),
                       "one process", prompt, args.tokens, args.repeat)]  # fmt: skip
    target = parse_target(f"local:{args.workers}")
    transports: tuple[Transport, ...] = ("refs", "values")
    for transport in transports:
        split = ray_runner(
            model, hp, target=target, numerics=args.numerics, threads=cores, piece=args.piece,
            transport=transport,
        )  # fmt: skip
        label = f"local:{args.workers} {transport}"
        results.append(measure(split, label, prompt, args.tokens, args.repeat))
        split.close()

    base = results[0]
    hc = hp.n_hc * hp.n_embd * 4
    print(
        f"model {args.model}: {hp.n_layer} layers, n_embd {hp.n_embd}, n_hc {hp.n_hc}; "
        f"{cores} cores (load average {os.getloadavg()[0]:.1f}); prompt {args.prompt}, decode "
        f"{args.tokens}, piece {args.piece}, numerics {args.numerics}, best of {args.repeat}"
    )
    print(f"{'run':<18} {'prefill t/s':>11} {'decode ms/t':>11} {'overhead ms/t':>13} "
          f"{'x one process':>13} {'HC bytes/t':>11} {'same tokens':>11}")  # fmt: skip
    for r in results:
        overhead = r.decode_ms - base.decode_ms
        moved = "-" if r.bytes_per_token is None else f"{r.bytes_per_token:,.0f}"
        print(
            f"{r.label:<18} {r.prefill_tps:>11.1f} {r.decode_ms:>11.2f} {overhead:>13.2f} "
            f"{r.decode_ms / base.decode_ms:>13.2f} {moved:>11} {r.tokens == base.tokens!s:>11}"
        )
    print(f"transport alone: {args.workers} do-nothing actors, Flash-sized hidden states, "
          f"median of {args.transport_iters} interleaved passes")  # fmt: skip
    print(f"{'rows':>6} {'MiB':>6} {'refs ms':>8} {'values ms':>9}")
    for rows in (1, args.piece):
        refs, values = transport_only(args.workers, rows, args.transport_iters)
        print(f"{rows:>6} {rows * FLASH_HC_BYTES / 2**20:>6.2f} {refs:>8.2f} {values:>9.2f}")
    hops = args.workers + 1
    print(
        f"hidden state per token per boundary: {hc:,} B here ({hp.n_hc} x {hp.n_embd} x 4); "
        f"{hops} hops per token with {args.workers} ranges (coordinator -> ranges -> "
        f"coordinator); DeepSeek V4 Flash: {FLASH_HC_BYTES:,} B per boundary, "
        f"{hops * FLASH_HC_BYTES:,} B per token"
    )


if __name__ == "__main__":
    main()
