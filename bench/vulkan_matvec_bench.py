"""Vulkan quantized matvec/matmul bandwidth on Flash shapes, next to the cpu kernels.

For each (type, in x out) shape: decode (1 token) GB/s of weight bytes read (f32-dot
kernels, and the ds4 numerics' integer-dot kernels in the last column), prefill
(--prefill-tokens tokens) time per matmul, and the device's copy bandwidth measured in
the same run (vkCmdCopyBuffer between two device-local buffers, bytes read + written).
Enough copies of each weight tensor (--total-mb) are cycled that caches do not serve
them. The cpu kernels' numbers on this machine's CPU sit alongside (they quantize the
activations first: the ds4 numerics' integer dots; the shaders dot in f32).

On Mesa's lavapipe the "GPU" is this CPU: those are CPU numbers, and say nothing about a
GPU. Run: .venv/bin/python bench/vulkan_matvec_bench.py [--total-mb 2048] (tools/gpu/).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np
import numpy.typing as npt
from bench.random_blocks import random_blocks

from ds4.adapters.compute.vulkan.runtime import MAX_SETS, Recorder, VulkanRuntime, runtime
from ds4.adapters.compute.vulkan.weights import (
    SHADERS_Q8,
    VulkanWeights,
    kernel_tables,
    record_matmul,
    record_matmul_q8,
    stage_activations,
    upload_weights,
)
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType

U8 = npt.NDArray[np.uint8]
# (what, type, cols = input width, rows = output width): Flash's per-layer shapes.
SHAPES = [
    ("attn_q_a", GGMLType.Q8_0, 4096, 1024),
    ("expert down", GGMLType.Q2_K, 2048, 4096),
    ("expert gate/up", GGMLType.IQ2_XXS, 4096, 2048),
    ("Q4_K 4096->2048", GGMLType.Q4_K, 4096, 2048),
    ("hc/router F16", GGMLType.F16, 4096, 1024),
]


def time_matmuls(rt: VulkanRuntime, ws: list[VulkanWeights], n_tok: int, reps: int) -> float:
    """Seconds per matmul: `reps` dispatches cycling over ws in one submission."""
    cols, rows = ws[0].cols, ws[0].rows
    x = rt.scratch("bench.x", n_tok * cols * 4)
    x.write(np.random.default_rng(0).standard_normal((n_tok, cols)).astype(np.float32))
    y = rt.device_buffer(n_tok * rows * 4)
    tables = kernel_tables(rt, ws[0])

    def record(rec: Recorder, count: int) -> None:
        for i in range(count):
            record_matmul(rec, ws[i % len(ws)], x, y, n_tok, tables)
            rec.barrier()  # one matmul after another, as a forward runs them

    rt.run(lambda rec: record(rec, min(len(ws), reps)))  # warm-up: pipelines, first touch
    start = time.perf_counter()
    rt.run(lambda rec: record(rec, reps))
    elapsed = time.perf_counter() - start
    y.release()
    return elapsed / reps


def time_q8_decode(rt: VulkanRuntime, ws: list[VulkanWeights], reps: int) -> float:
    """Seconds per ds4-numerics decode matvec (integer dots; activation quantized once)."""
    x = np.random.default_rng(0).standard_normal((1, ws[0].cols)).astype(np.float32)
    acts = stage_activations(ws[0], x)
    tables = kernel_tables(rt, ws[0])

    def record(rec: Recorder, count: int) -> None:
        for i in range(count):
            record_matmul_q8(rec, ws[i % len(ws)], acts, 1, tables)
            rec.barrier()

    rt.run(lambda rec: record(rec, min(len(ws), reps)))
    start = time.perf_counter()
    rt.run(lambda rec: record(rec, reps))
    return (time.perf_counter() - start) / reps


def copy_bandwidth(rt: VulkanRuntime, nbytes: int, reps: int) -> float:
    """Device copy GB/s, bytes read + written, between two device-local buffers."""
    src, dst = rt.device_buffer(nbytes), rt.device_buffer(nbytes)
    rt.run(lambda rec: rec.copy(src, dst, nbytes))
    start = time.perf_counter()

    def record(rec: Recorder) -> None:
        for _ in range(reps):
            rec.copy(src, dst, nbytes)
            rec.barrier()

    rt.run(record)
    elapsed = time.perf_counter() - start
    src.release()
    dst.release()
    return 2 * nbytes * reps / elapsed / 1e9


def cpu_kernels() -> Any:
    """The native cpu kernels, or None where this checkout has not built them."""
    try:
        from ds4.adapters.compute import cpu_kernels as ck
    except ImportError:
        return None
    return ck


def cpu_time(ck: Any, raw: U8, kind: GGMLType, n_tok: int, reps: int) -> float:
    cols = raw.shape[1] // BLOCK_GEOMETRY[kind].nbytes * BLOCK_GEOMETRY[kind].elements
    x = np.random.default_rng(0).standard_normal((n_tok, cols)).astype(np.float32)
    ck.matmul(raw, kind, x)
    start = time.perf_counter()
    for _ in range(reps):
        ck.matmul(raw, kind, x)
    return (time.perf_counter() - start) / reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--total-mb",
        type=int,
        default=48,
        help="weight bytes per shape, in distinct copies cycled (default 48)",
    )
    ap.add_argument("--prefill-tokens", type=int, default=32, help="tokens per prefill matmul")
    ap.add_argument("--reps", type=int, default=64, help="matmuls per timed submission")
    ap.add_argument("--copy-mb", type=int, default=64, help="device copy size (default 64)")
    ap.add_argument("--no-cpu", action="store_true", help="skip the cpu kernel columns")
    args = ap.parse_args()
    for name, value, top in (("--total-mb", args.total_mb, 1 << 20), ("--copy-mb", args.copy_mb,
                             1 << 16), ("--reps", args.reps, MAX_SETS // 2),
                             ("--prefill-tokens", args.prefill_tokens, 4096)):  # fmt: skip
        if not 1 <= value <= top:
            ap.error(f"{name} must be in 1..{top}, got {value}")
    rt = runtime()
    dev = rt.dev
    print(f"device: {dev.describe()}")
    if dev.kind == "CPU":
        print("NOTE: this Vulkan device is a CPU implementation (lavapipe): every 'vulkan' "
              "number below is a CPU number, not a GPU number.")  # fmt: skip
    copy_mb = min(args.copy_mb, dev.max_storage_range >> 20)
    copy = copy_bandwidth(rt, copy_mb << 20, max(4, args.reps // 8))
    print(f"device copy bandwidth: {copy:.1f} GB/s (read + write, {copy_mb} MiB buffers)")
    ck = None if args.no_cpu else cpu_kernels()
    if ck is None:
        print("cpu kernels: not measured (--no-cpu, or ds4._native_cpu not built here)")
    else:
        print(f"cpu kernels: {ck.threads()} threads, {ck.best_impl()}; cores {os.cpu_count()}")
    head = (f"{'shape':<18}{'type':<9}{'MiB':>6}{'vk dec GB/s':>12}{'% copy':>8}"
            f"{'cpu dec GB/s':>13}{'vk/cpu':>8}{'vk pre ms':>10}{'cpu pre ms':>11}"
            f"{'vk q8 GB/s':>11}")  # fmt: skip
    print(head)
    rng = np.random.default_rng(1)
    for what, kind, cols, rows in SHAPES:
        raw = random_blocks(kind, rows, cols, rng)
        copies = max(1, (args.total_mb << 20) // raw.nbytes)
        ws = [upload_weights(raw, kind, cols, rt=rt) for _ in range(copies)]
        dec = time_matmuls(rt, ws, 1, args.reps)
        pre = time_matmuls(rt, ws, args.prefill_tokens, max(4, args.reps // 8))
        vk_gbs = raw.nbytes / dec / 1e9
        line = f"{what:<18}{kind.name:<9}{raw.nbytes / 2**20:>6.1f}{vk_gbs:>12.3f}"
        line += f"{100 * vk_gbs / copy:>7.1f}%"
        if ck is None:
            line += f"{'-':>13}{'-':>8}{pre * 1e3:>10.2f}{'-':>11}"
        else:
            cdec = cpu_time(ck, raw, kind, 1, 20)
            cpre = cpu_time(ck, raw, kind, args.prefill_tokens, 3)
            line += f"{raw.nbytes / cdec / 1e9:>13.3f}{cdec / dec:>8.3f}"
            line += f"{pre * 1e3:>10.2f}{cpre * 1e3:>11.2f}"
        if kind in SHADERS_Q8:
            line += f"{raw.nbytes / time_q8_decode(rt, ws, args.reps) / 1e9:>11.3f}"
        else:
            line += f"{'-':>11}"
        print(line, flush=True)
        for w in ws:
            w.release()
    print("vk/cpu: cpu time / vulkan time for one decode matvec (> 1: vulkan faster); "
          "vk q8: the ds4-numerics integer-dot kernels' decode GB/s.")  # fmt: skip


if __name__ == "__main__":
    main()
