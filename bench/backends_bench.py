"""cpu vs reference vs HF transformers (torch CPU) on the same tiny model and tokens.

Weights: the oracle's `mixed` tiny checkpoint (tools/oracle, made on demand), converted to
an f32 GGUF for ds4; all three run fp32 numerics on identical weights and token ids.
Prefill: N prompt tokens in one call. Decode: M greedy tokens one at a time (HF with its
KV cache). Prints tokens/s and the ratios, plus the share of cpu decode time spent in
Python (time outside the native calls) on the f32 model and on a q2 tiny model.
Run: .venv/bin/python bench/backends_bench.py [--threads N] [--prefill 64] [--decode 32]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ds4.adapters.compute import cpu_kernels
from ds4.adapters.compute.cpu import CpuRunner, open_cpu_runner
from ds4.adapters.compute.reference import open_reference_runner
from ds4.ports.compute import ModelRunner

REPO = Path(__file__).resolve().parents[1]


def sh(*args: str) -> None:
    subprocess.run([sys.executable, *args], cwd=REPO, check=True, capture_output=True)


def fixtures(work: Path) -> tuple[Path, Path, Path, Path]:
    """(hf dir, f32 gguf of the same weights, q2 tiny-2layer and tiny ggufs), made when
    missing."""
    hf = work / "mixed" / "hf"
    if not hf.is_dir():
        sh("-m", "tools.oracle.make_fixtures", "--out", str(work), "--schedule", "mixed")
    f32 = work / "mixed_f32.gguf"
    if not f32.exists():
        sh("-m", "ds4", "gguf", "convert", "--hf", str(hf), "--out", str(f32), "--quant", "f32",
           "--quiet")  # fmt: skip
    q2 = work / "tiny_q2.gguf"
    if not q2.exists():
        sh("-m", "ds4", "gguf", "tiny", "--out", str(q2), "--quant", "q2", "--preset",
           "tiny-2layer", "--quiet")  # fmt: skip
    q2_six = work / "tiny6_q2.gguf"
    if not q2_six.exists():
        sh("-m", "ds4", "gguf", "tiny", "--out", str(q2_six), "--quant", "q2", "--quiet")
    return hf, f32, q2, q2_six


def ds4_rates(
    runner: ModelRunner, prompt: list[int], n_decode: int
) -> tuple[float, float, list[int]]:
    session = runner.new_session(len(prompt) + n_decode + 1)
    t0 = time.perf_counter()
    logits = session.prefill(prompt)
    prefill = len(prompt) / (time.perf_counter() - t0)
    tokens = []
    t0 = time.perf_counter()
    for _ in range(n_decode):
        tokens.append(int(np.argmax(logits)))
        logits = session.eval(tokens[-1])
    return prefill, n_decode / (time.perf_counter() - t0), tokens


def hf_rates(
    hf_dir: Path, prompt: list[int], n_decode: int, threads: int
) -> tuple[float, float, list[int]]:
    import torch
    from transformers import DeepseekV4ForCausalLM

    torch.set_num_threads(threads)
    model = DeepseekV4ForCausalLM.from_pretrained(str(hf_dir), torch_dtype=torch.float32)
    model.train(False)
    with torch.no_grad():
        ids = torch.tensor([prompt])
        t0 = time.perf_counter()
        out = model(input_ids=ids, use_cache=True)
        prefill = len(prompt) / (time.perf_counter() - t0)
        past, logits, tokens = out.past_key_values, out.logits[0, -1], []
        t0 = time.perf_counter()
        for _ in range(n_decode):
            tokens.append(int(torch.argmax(logits)))
            out = model(
                input_ids=torch.tensor([[tokens[-1]]]), past_key_values=past, use_cache=True
            )
            past, logits = out.past_key_values, out.logits[0, -1]
    return prefill, n_decode / (time.perf_counter() - t0), tokens


def python_share(runner: ModelRunner, prompt: list[int], n_decode: int) -> tuple[float, float]:
    """(ms per token, native ms per token) for cpu decode, from the native forward's own
    clock (time inside its two native calls per token: layers, head)."""
    assert isinstance(runner, CpuRunner)
    forward = runner.forward
    session = runner.new_session(len(prompt) + n_decode + 1)
    logits = session.prefill(prompt)
    forward.native_seconds = 0.0
    t0 = time.perf_counter()
    for _ in range(n_decode):
        logits = session.eval(int(np.argmax(logits)))
    wall = time.perf_counter() - t0
    return 1e3 * wall / n_decode, 1e3 * forward.native_seconds / n_decode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/ds4_backends_bench"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--prefill", type=int, default=64)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--skip-hf", action="store_true")
    args = ap.parse_args()
    hf, f32, q2, q2_six = fixtures(args.work)
    prompt = [0] + [
        int(t) for t in np.random.default_rng(5).integers(100, 128000, args.prefill - 1)
    ]
    print(f"model: oracle 'mixed' tiny, f32 weights, fp32 numerics; {args.prefill}-token "
          f"prefill, {args.decode} greedy decode steps; {args.threads} threads "
          f"({cpu_kernels.best_impl()} kernels)")  # fmt: skip
    rates: dict[str, tuple[float, float, list[int]]] = {}
    rates["cpu"] = ds4_rates(open_cpu_runner(str(f32), numerics="fp32", threads=args.threads),
                             prompt, args.decode)  # fmt: skip
    rates["reference"] = ds4_rates(open_reference_runner(str(f32), numerics="fp32"), prompt,
                                   args.decode)  # fmt: skip
    if not args.skip_hf:
        rates["hf"] = hf_rates(hf, prompt, args.decode, args.threads)
    for name, (pre, dec, toks) in rates.items():
        same = "same tokens" if toks == rates["cpu"][2] else "DIFFERENT tokens"
        print(f"{name:>10}: prefill {pre:9.1f} t/s   decode {dec:8.2f} t/s   ({same} as cpu)")
    for other in [k for k in rates if k != "cpu"]:
        print(f"cpu / {other}: prefill {rates['cpu'][0] / rates[other][0]:.1f}x, "
              f"decode {rates['cpu'][1] / rates[other][1]:.1f}x")  # fmt: skip
    cases = (("f32 mixed", f32, "fp32"), ("q2 tiny-2layer", q2, "ds4"),
             ("q2 tiny-2layer", q2, "exact"), ("q2 tiny (6 layers)", q2_six, "ds4"),
             ("q2 tiny (6 layers)", q2_six, "exact"))  # fmt: skip
    for label, path, numerics in cases:
        runner = open_cpu_runner(str(path), numerics=numerics, threads=args.threads)
        ms, native_ms = python_share(runner, prompt, args.decode)
        print(f"cpu decode, {label}, {numerics}: {ms:.2f} ms/token, native {native_ms:.2f} ms, "
              f"Python {1 - native_ms / ms:.1%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
