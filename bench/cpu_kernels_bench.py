"""Flash-shaped single-layer microbenchmark of the native CPU kernels (random weights).

Decode: the weight bytes one token reads in one layer (attention projections and the
shared expert in Q8_0, 6 of 256 routed experts in IQ2_XXS gate/up + Q2_K down) divided by
the time, as a fraction of this machine's memory bandwidth measured in the same run
(a large numpy copy). Prefill: the same projections for a 512-token chunk in tokens/s,
with the multiply-add rate next to the machine's int8 and f32 SIMD peaks (register-only
probe loops on the same threads). Run: .venv/bin/python bench/cpu_kernels_bench.py
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.adapters.compute import cpu_kernels as ck
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType

U8 = npt.NDArray[np.uint8]
F32 = npt.NDArray[np.float32]
Q8, IQ2, Q2K = GGMLType.Q8_0, GGMLType.IQ2_XXS, GGMLType.Q2_K
N_EMBD, N_FF, N_USED, CLAMP = 4096, 2048, 6, 10.0
# (name, cols = input width, rows = output width); attn_output_a is 8 groups of
# 1024 rows over 4096 inputs each: the same bytes and multiply-adds as 8192 x 4096.
ATTENTION = [("attn_q_a", 4096, 1024), ("attn_q_b", 1024, 32768), ("attn_kv", 4096, 512),
             ("attn_output_a", 4096, 8192), ("attn_output_b", 8192, 4096)]  # fmt: skip
SHARED = [("shexp_gate", N_EMBD, N_FF), ("shexp_up", N_EMBD, N_FF), ("shexp_down", N_FF, N_EMBD)]


def random_blocks(ggml_type: GGMLType, rows: int, cols: int, rng: np.random.Generator) -> U8:
    """Random block bytes whose f16 scale fields hold small normal values."""
    geo = BLOCK_GEOMETRY[ggml_type]
    raw = rng.integers(0, 256, (rows, cols // geo.elements, geo.nbytes), dtype=np.uint8)
    fields = {Q8: (0,), IQ2: (0,), Q2K: (80, 82)}[ggml_type]
    for off in fields:
        scale = (rng.random(raw.shape[:2]) * 0.01 + 0.001).astype(np.float16)
        raw[:, :, off : off + 2] = scale.view(np.uint8).reshape(*raw.shape[:2], 2)
    return raw.reshape(rows, -1)


def expert_tensor(
    ggml_type: GGMLType, n_expert: int, rows: int, cols: int, rng: np.random.Generator
) -> U8:
    """(n_expert, rows, row_bytes): 4 distinct random experts tiled (fast to build)."""
    distinct = np.stack([random_blocks(ggml_type, rows, cols, rng) for _ in range(4)])
    out = np.empty((n_expert, *distinct.shape[1:]), dtype=np.uint8)
    for e in range(n_expert):
        out[e] = distinct[e % 4]
    return out


def best_time(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def copy_bandwidth() -> float:
    """Bytes moved per second (read + write) by a 512 MiB numpy copy, best of 4."""
    src = np.ones(64 << 20, dtype=np.float64)
    dst = np.empty_like(src)
    return 2 * src.nbytes / best_time(lambda: np.copyto(dst, src), 4)


def simd_peaks() -> tuple[float, float]:
    """Measured int8 and f32 multiply-adds per second over the kernel thread pool."""
    lib = _native_cpu.lib
    out = []
    iters = 20_000_000
    for kind in (0, 1):

        def probe(k: int = kind) -> int:
            return int(lib.ds4_cpu_probe_macs(k, iters))

        out.append(probe() / best_time(probe, 2))
    return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--experts", type=int, default=256)
    parser.add_argument("--prefill", type=int, default=512, help="tokens in the prefill chunk")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.threads:
        ck.set_threads(args.threads)
    rng = np.random.default_rng(0)
    attn = {name: (random_blocks(Q8, rows, cols, rng), cols) for name, cols, rows in ATTENTION}
    shared = {name: (random_blocks(Q8, rows, cols, rng), cols) for name, cols, rows in SHARED}
    gate = ck.ExpertWeights(expert_tensor(IQ2, args.experts, N_FF, N_EMBD, rng), IQ2)
    up = ck.ExpertWeights(expert_tensor(IQ2, args.experts, N_FF, N_EMBD, rng), IQ2)
    down = ck.ExpertWeights(expert_tensor(Q2K, args.experts, N_EMBD, N_FF, rng), Q2K)
    routed_bytes = N_USED * (gate.raw[0].nbytes + up.raw[0].nbytes + down.raw[0].nbytes)

    bandwidth = copy_bandwidth()
    int8_peak, f32_peak = simd_peaks()
    print(f"threads {ck.threads()}  kernels {ck.best_impl()}  experts {args.experts}")
    print(f"memory bandwidth (numpy copy, read+write): {bandwidth / 1e9:.1f} GB/s")
    print(f"SIMD peak probes: int8 {int8_peak / 1e9:.1f} GMAC/s, f32 {f32_peak / 1e9:.1f} GMAC/s")

    print("\ndecode (1 token, one layer)")
    xs = {n: rng.standard_normal(c).astype(np.float32) for n, (_, c) in {**attn, **shared}.items()}
    picks = [rng.choice(args.experts, N_USED, replace=False) for _ in range(args.repeat + 1)]
    wts = np.full(N_USED, 1 / N_USED, dtype=np.float32)
    x_moe = rng.standard_normal(N_EMBD).astype(np.float32)
    pick_iter = iter(picks * 2)

    def run_dense(group: dict[str, tuple[U8, int]]) -> None:
        for name, (raw, _) in group.items():
            ck.matvec(raw, Q8, xs[name])

    def run_routed() -> None:
        ck.moe_forward(x_moe, gate, up, down, next(pick_iter), wts, clamp=CLAMP)

    def decode_line(label: str, nbytes: float, t: float) -> None:
        rate = nbytes / t
        print(f"  {label:24s} {nbytes / 1e6:7.1f} MB  {t * 1e3:7.2f} ms  {rate / 1e9:5.1f} GB/s"
              f"  = {rate / bandwidth:5.1%} of bandwidth")  # fmt: skip

    parts: list[tuple[str, Callable[[], None], int]] = [
        ("attention Q8_0", lambda: run_dense(attn), sum(r.nbytes for r, _ in attn.values())),
        (
            "shared expert Q8_0",
            lambda: run_dense(shared),
            sum(r.nbytes for r, _ in shared.values()),
        ),
        ("routed 6x IQ2_XXS/Q2_K", run_routed, routed_bytes),
    ]
    total_t = total_b = 0.0
    for label, fn, nbytes in parts:
        t = best_time(fn, args.repeat)
        total_t, total_b = total_t + t, total_b + nbytes
        decode_line(label, nbytes, t)
    decode_line("layer total", total_b, total_t)

    n = args.prefill
    print(f"\nprefill ({n}-token chunk, one layer's projections)")
    xp = {c: rng.standard_normal((n, c)).astype(np.float32) for c in (1024, 2048, 4096, 8192)}
    ids = np.stack([rng.choice(args.experts, N_USED, replace=False) for _ in range(n)])

    def run_dense_prefill() -> None:
        for raw, cols in [*attn.values(), *shared.values()]:
            ck.matmul(raw, Q8, xp[cols])

    def run_routed_prefill() -> None:
        for e in np.unique(ids):
            tok = np.nonzero(ids == e)[0]
            g = ck.matmul(gate.raw[e], IQ2, xp[N_EMBD][tok])
            u = ck.matmul(up.raw[e], IQ2, xp[N_EMBD][tok])
            with np.errstate(over="ignore"):
                mid = (g / (1 + np.exp(-g)) * u).astype(np.float32)
            ck.matmul(down.raw[e], Q2K, mid)

    dense_macs = sum(r * c for _, c, r in ATTENTION + SHARED) * n
    routed_macs = 3 * N_FF * N_EMBD * N_USED * n

    def prefill_line(label: str, macs: float, t: float) -> None:
        rate = macs / t
        peaks = f"{rate / int8_peak:5.1%} of int8 peak, {rate / f32_peak:5.1%} of f32 peak"
        print(f"  {label:24s} {t:6.2f} s  {n / t:7.1f} tok/s  {rate / 1e9:6.1f} GMAC/s  = {peaks}")

    t_dense = best_time(run_dense_prefill, 1)
    prefill_line("attention + shared Q8_0", dense_macs, t_dense)
    t_routed = best_time(run_routed_prefill, 1)
    prefill_line("routed IQ2_XXS/Q2_K", routed_macs, t_routed)
    prefill_line("layer total", dense_macs + routed_macs, t_dense + t_routed)


if __name__ == "__main__":
    main()
