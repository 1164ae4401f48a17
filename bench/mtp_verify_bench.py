"""What verifying MTP drafts costs on a Flash-shaped layer (docs/mtp.md).

Speculative decoding evaluates the sampled token and its N drafts in one pass of the
main model. On a CPU whose decode is bound by reading weights that pass would cost
about one token if every row read the same weights; Flash's routed experts are not
shared (each row reads its own 6 of 256), so the pass reads the attention, HC and
shared-expert weights once but up to 6 (N + 1) experts. This measures it:

- one Flash layer (bench/flash_layer_bench.py's: ratio-4 compressor + indexer, biased
  top-k routing, q2 mixture, random weights) after a --context token prefill: the time
  of a pass over 1, 2, 3 and 5 rows (0, 1, 2 and 4 drafts), median of --repeat passes
  (the row counts taking turns), each on fresh tokens and rewound afterwards, and its
  ratio to one row;
- the output head (random Q8_0, 129280 x 4096: 563 MB) over the same row counts;
- the weight bytes a pass over k rows reads against one row (the attention, HC and
  shared-expert weights once, the routed experts of every row): what the pass would
  cost on a machine bound by memory bandwidth;
- a projection to the whole model on this machine: one token = 43 layers + head, a
  verified block = 43 layers over N+1 rows + head over N+1 rows, one draft = one
  layer + head (the MTP block is one ratio-0 layer; counted as a ratio-4 one, which
  overstates it), and the speed-up for an acceptance rate α:
  E[tokens per block] = (1 − α^(N+1)) / (1 − α) over (block + N drafts) / one token;
  and the same with each pass costing its weight bytes (a bandwidth-bound machine).

Run (from the repository root): .venv/bin/python -m bench.mtp_verify_bench
[--context 256] [--repeat 7] [--acceptance 0.5]. About 3.5 GB of RAM.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
from bench.cpu_kernels_bench import copy_bandwidth, random_blocks, simd_peaks
from bench.flash_layer_bench import MemoryModel, decode_bytes, token_macs

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.adapters.compute import cpu_kernels
from ds4.adapters.compute.cpu.native_forward import NativeForward
from ds4.adapters.gguf.model_files import TensorValues
from ds4.adapters.quant.native_codec import NativeDequantizer
from ds4.domain.engine_math.lowprec import numerics_named
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.model.presets import FLASH

ROWS = (1, 2, 3, 5)  # a sampled token and 0, 1, 2, 4 drafts


def pass_times(fwd: NativeForward, seq: object, ids: np.ndarray, start: int, repeat: int
                ) -> dict[int, float]:  # fmt: skip
    """Median native time of a pass over k rows at position `start`, for each k in ROWS,
    each on fresh tokens and rewound after. The row counts take turns, so a change in
    the machine's load hits them alike."""
    times: dict[int, list[float]] = {k: [] for k in ROWS}
    offset = start
    for _ in range(repeat):
        for k in ROWS:
            before = fwd.native_seconds
            fwd.run(seq, ids[offset : offset + k])
            times[k].append(fwd.native_seconds - before)
            _native_cpu.lib.ds4_fw_seq_truncate(seq, start)
            offset += k
    return {k: float(np.median(t)) for k, t in times.items()}


def routed_bytes(model: MemoryModel, hp: object) -> int:
    """Bytes of the routed experts one row reads in layer 0 (its n_expert_used experts)."""
    total = 0
    for name in model.tensors:
        if name.startswith("blk.0.") and name.endswith("_exps.weight"):
            total += model.raw(name)[0].nbytes * FLASH.n_expert_used
    return total


def head_times(repeat: int) -> dict[int, float]:
    """Median time of the Q8_0 output product over k rows (the head's weight pass)."""
    rng = np.random.default_rng(3)
    raw = random_blocks(GGMLType.Q8_0, FLASH.n_vocab, FLASH.n_embd, rng)
    xs = {k: rng.standard_normal((k, FLASH.n_embd)).astype(np.float32) for k in ROWS}
    times: dict[int, list[float]] = {k: [] for k in ROWS}
    cpu_kernels.matmul(raw, GGMLType.Q8_0, xs[1])
    for _ in range(repeat):
        for k in ROWS:  # taking turns, as for the layer
            t0 = time.perf_counter()
            cpu_kernels.matmul(raw, GGMLType.Q8_0, xs[k])
            times[k].append(time.perf_counter() - t0)
    return {k: float(np.median(t)) for k, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--context", type=int, default=256, help="tokens prefilled first")
    ap.add_argument("--repeat", type=int, default=7, help="passes per row count (median)")
    ap.add_argument("--acceptance", type=float, default=0.5,
                    help="draft acceptance rate for the projection (docs/mtp.md)")  # fmt: skip
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        cpu_kernels.set_threads(args.threads)
    hp = dataclasses.replace(
        FLASH, n_layer=1, compress_ratios=(4,), n_hash_layer=0, swiglu_clamp=(10.0,)
    )
    n_tokens = args.context + args.repeat * sum(ROWS)
    rng = np.random.default_rng(1)
    tokens = [int(t) for t in rng.choice(hp.n_vocab, n_tokens, replace=False)]
    t0 = time.perf_counter()
    model = MemoryModel(hp, tokens, seed=2)
    weights = TensorValues(model, NativeDequantizer())
    fwd = NativeForward(hp, model, weights, numerics_named("ds4"), cpu_kernels.IMPLS["auto"])
    print(f"one Flash layer in memory, built in {time.perf_counter() - t0:.0f} s; "
          f"{cpu_kernels.threads()} threads, {cpu_kernels.best_impl()} kernels")  # fmt: skip
    seq = fwd.new_seq()
    ids = np.array(tokens, dtype=np.int64)
    fwd.run(seq, ids[: args.context])
    layer = pass_times(fwd, seq, ids, args.context, args.repeat)
    head = head_times(args.repeat)
    bandwidth = copy_bandwidth()
    int8_peak, _ = simd_peaks()
    nbytes = decode_bytes(model, hp, args.context // 4 > hp.indexer_top_k)
    macs = token_macs(model, hp, args.context // 4 > hp.indexer_top_k)
    print(f"memory bandwidth (numpy copy): {bandwidth / 1e9:.1f} GB/s; int8 SIMD peak "
          f"{int8_peak / 1e9:.1f} GMAC/s; one row of the layer: {nbytes / 1e6:.0f} MB of "
          f"weights, {macs / 1e6:.0f} M multiply-adds")  # fmt: skip
    routed = routed_bytes(model, hp)
    byte_ratio = {k: (nbytes - routed + k * routed) / nbytes for k in ROWS}
    print(f"\nverification pass after {args.context} tokens (median of {args.repeat}):")
    print("rows  drafts  layer ms  x 1 row  weight bytes x 1 row  GMAC/s  head ms  x 1 row")
    for k in ROWS:
        print(f"{k:4d}  {k - 1:6d}  {layer[k] * 1e3:8.2f}  {layer[k] / layer[1]:7.2f}"
              f"  {byte_ratio[k]:20.2f}  {k * macs / layer[k] / 1e9:6.1f}"
              f"  {head[k] * 1e3:7.2f}  {head[k] / head[1]:7.2f}")  # fmt: skip
    rate = nbytes / layer[1]
    print(
        f"one row reads weights at {rate / 1e9:.1f} GB/s = {rate / bandwidth:.0%} of the "
        f"copy bandwidth and computes at {macs / layer[1] / int8_peak:.0%} of the int8 peak"
    )
    one = 43 * layer[1] + head[1]
    draft = layer[1] + head[1]
    a = args.acceptance
    print(f"\nwhole-model projection (43 layers + head; a draft = 1 layer + head = "
          f"{draft / one:.3f} token), acceptance {a:.2f}:")  # fmt: skip
    print("drafts  block+drafts (tokens)  tokens/block  speed-up  bandwidth-bound speed-up")
    for k in ROWS[1:]:
        n = k - 1
        cost = (43 * layer[k] + head[k] + n * draft) / one
        # a machine bound by weight reads: a pass costs its bytes (the head is read once)
        bound = (43 * layer[1] * byte_ratio[k] + head[1] + n * draft) / one
        expect = (1 - a ** (n + 1)) / (1 - a) if a < 1 else n + 1
        print(f"{n:6d}  {cost:21.2f}  {expect:12.2f}  {expect / cost:8.2f}"
              f"  {expect / bound:24.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
