"""Vulkan routed-expert products: grouped by expert vs one workgroup per (token, slot).

One expert tensor (--experts x --rows rows of --cols values, --type) and --tokens
tokens routed to --k experts each (uniformly at random, so at prefill sizes every
expert is busy). Times, side by side in one process, the ds4 numerics' integer-dot
kernels per pair (`matvec_<type>_q8_moe`, what decode uses) and grouped by expert in
chunks of 8 pairs (`matvec_<type>_q8_moe_grouped`, with the moe_group pass), and the
fp32 grouped kernel (`matvec_<type>_moe`). Prints milliseconds per product and the
ratio; no GB/s claim (the bytes read depend on the cache).

On Mesa's lavapipe the "GPU" is this CPU: those are CPU numbers, and say nothing about a
GPU. Run: .venv/bin/python bench/vulkan_moe_bench.py [--tokens 64] [--experts 32].
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from ds4.adapters.compute.vulkan.moe import (
    ExpertGroups,
    chunk_table_bytes,
    record_moe_group,
    record_moe_matmul,
    record_moe_matmul_q8,
    record_moe_matmul_q8_grouped,
)
from ds4.adapters.compute.vulkan.runtime import Recorder, runtime
from ds4.adapters.compute.vulkan.weights import (
    SHADERS_Q8,
    kernel_tables,
    stage_activations,
    upload_weights,
)
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--type", default="IQ2_XXS", help="expert weight type (default IQ2_XXS)")
    ap.add_argument("--experts", type=int, default=16, help="experts (default 16)")
    ap.add_argument("--rows", type=int, default=512, help="rows per expert (default 512)")
    ap.add_argument("--cols", type=int, default=1024, help="values per row (default 1024)")
    ap.add_argument("--tokens", type=int, default=32, help="tokens (default 32)")
    ap.add_argument("--k", type=int, default=6, help="experts per token (default 6)")
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions (default 3)")
    args = ap.parse_args()
    kind = GGMLType[args.type]
    if kind not in SHADERS_Q8:
        ap.error(f"--type {args.type}: no integer-dot kernel (have {[k.name for k in SHADERS_Q8]})")
    geo = BLOCK_GEOMETRY[kind]
    for name, value, low in (("--experts", args.experts, 1), ("--rows", args.rows, 1),
                             ("--tokens", args.tokens, 1), ("--reps", args.reps, 1)):  # fmt: skip
        if value < low:
            ap.error(f"{name} must be at least {low}")
    if args.cols < 256 or args.cols % 256 or not 1 <= args.k <= args.experts:
        ap.error("--cols must be a multiple of 256; --k within 1..--experts")
    rt = runtime()
    rng = np.random.default_rng(0)
    n_rows = args.experts * args.rows
    raw = rng.integers(0, 256, (n_rows, args.cols // geo.elements * geo.nbytes), np.uint8)
    if kind is not GGMLType.Q8_0:  # keep the f16 scales finite and small
        raw[:, : geo.nbytes] = 0
    w = upload_weights(raw, kind, args.cols, rt=rt)
    x = rng.standard_normal((args.tokens, args.cols)).astype(np.float32)
    ids = np.stack([rng.choice(args.experts, args.k, replace=False)
                    for _ in range(args.tokens)]).astype(np.int32).reshape(-1)  # fmt: skip
    n_pairs = ids.size
    acts = stage_activations(w.view(0, args.rows), x)
    y = rt.device_buffer(n_pairs * args.rows * 4)
    idb = rt.host_buffer(ids.nbytes)
    idb.write(ids)
    xb = rt.host_buffer(x.nbytes)
    xb.write(x)
    perm = rt.device_buffer(ids.nbytes)
    chunks = rt.device_buffer(chunk_table_bytes(n_pairs, args.experts))
    tables = kernel_tables(rt, w)
    q8 = [acts[0], acts[1], y, acts[3]]

    def per_pair(rec: Recorder) -> None:
        record_moe_matmul_q8(rec, w, args.experts, q8, idb, n_pairs, args.k, tables)

    groups = ExpertGroups(perm, chunks, n_pairs, args.experts)

    def grouped(rec: Recorder) -> None:
        record_moe_group(rec, idb, groups)
        rec.barrier()
        record_moe_matmul_q8_grouped(rec, w, groups, q8, args.k, tables)

    def grouped_f32(rec: Recorder) -> None:
        record_moe_group(rec, idb, groups)
        rec.barrier()
        record_moe_matmul(rec, w, groups, xb, y, args.k, tables)

    def timed(record: Callable[[Recorder], None]) -> float:
        rt.run(record)  # warm: pipelines built
        start = time.perf_counter()
        for _ in range(args.reps):
            rt.run(record)
        return float((time.perf_counter() - start) / args.reps * 1e3)

    print(f"device: {rt.dev.name}; {kind.name} {args.experts} experts x {args.rows} x "
          f"{args.cols}, {args.tokens} tokens x k={args.k} ({n_pairs} pairs)")  # fmt: skip
    a, b, c = timed(per_pair), timed(grouped), timed(grouped_f32)
    print(f"q8 per pair   {a:9.2f} ms")
    print(f"q8 grouped    {b:9.2f} ms   per pair / grouped = {a / b:.2f}")
    print(f"f32 grouped   {c:9.2f} ms")
    for buf in (y, idb, xb, perm, chunks):
        buf.release()
    w.release()


if __name__ == "__main__":
    main()
