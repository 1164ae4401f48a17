"""The one-token routed MoE (ds4_cpu_moe, Flash's shape: 256 experts, 6 used, IQ2_XXS
gate/up 4096 -> 2048, Q2_K down 2048 -> 4096) with the down projections in the GGUF
layout vs repacked into rows interleaved by 8 (docs/adr/0067-q2k-row-interleaved-repack.md).

Same weights, activations and expert choices (random per call, so the experts stream from
memory) for both; rounds alternate which side goes first; prints the median [quartiles]
of the per-round ratios (> 1: the repacked layout is faster).

Run (from the repository root, AVX-512 CPUs only): .venv/bin/python -m bench.moe_repack_bench
[--threads N] [--rounds N] [--calls N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench.cpu_kernels_bench import expert_tensor

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.adapters.compute import cpu_kernels
from ds4.domain.gguf.ggml_types import GGMLType

_ffi, _lib = _native_cpu.ffi, _native_cpu.lib
D, F, E, K = 4096, 2048, 256, 6


def _experts(raw: np.ndarray, kind: GGMLType, stride: int, row: int, x8: int) -> object:
    s = _ffi.new("ds4_cpu_experts *")
    s.base = _ffi.cast("const uint8_t *", raw.ctypes.data)
    s.expert_stride, s.row_stride, s.type, s.x8 = stride, row, int(kind), x8
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=7, help="alternations (default: 7)")
    ap.add_argument("--calls", type=int, default=40, help="MoE calls per side and round")
    args = ap.parse_args()
    if "avx512" not in cpu_kernels.available_impls():
        ap.error("the repacked kernel needs the avx512 kernel set")
    if args.threads:
        cpu_kernels.set_threads(args.threads)
    rng = np.random.default_rng(3)
    gate = expert_tensor(GGMLType.IQ2_XXS, E, F, D, rng)
    up = expert_tensor(GGMLType.IQ2_XXS, E, F, D, rng)
    down = expert_tensor(GGMLType.Q2_K, E, D, F, rng)
    per = int(_lib.ds4_cpu_q2k_x8_bytes(D, F))
    packed = np.empty(per * E + 64, np.uint8)
    packed = packed[(-packed.ctypes.data) % 64 :][: per * E]
    for e in range(E):
        src = _ffi.cast("const uint8_t *", down[e].ctypes.data)
        dst = _ffi.cast("uint8_t *", packed.ctypes.data + e * per)
        assert _lib.ds4_cpu_q2k_x8_repack(src, down.strides[1], D, F, dst) == 0
    g = _experts(gate, GGMLType.IQ2_XXS, gate.strides[0], gate.strides[1], 0)
    u = _experts(up, GGMLType.IQ2_XXS, up.strides[0], up.strides[1], 0)
    sides = (
        _experts(down, GGMLType.Q2_K, down.strides[0], down.strides[1], 0),
        _experts(packed, GGMLType.Q2_K, per, down.shape[-1], 1),
    )
    x = rng.standard_normal((args.calls, D)).astype(np.float32)
    ids = np.stack([rng.choice(E, K, replace=False) for _ in range(args.calls)]).astype(np.int32)
    wts = np.full(K, 1.0 / K, np.float32)
    out = np.empty((2, D), np.float32)
    auto = cpu_kernels.IMPLS["auto"]

    def run(side: int) -> float:
        t0 = time.perf_counter()
        for c in range(args.calls):
            rc = _lib.ds4_cpu_moe(
                _ffi.cast("const float *", x[c].ctypes.data), D, F, E, g, u, sides[side],
                _ffi.cast("const int32_t *", ids[c].ctypes.data),
                _ffi.cast("const float *", wts.ctypes.data), K, 10.0,
                _ffi.cast("float *", out[side].ctypes.data), auto,
            )  # fmt: skip
            assert rc == 0, rc
        return float((time.perf_counter() - t0) / args.calls)

    run(0), run(1)
    rel = float(np.abs(out[1] - out[0]).max() / np.abs(out[0]).max())
    ratios, best = [], [float("inf")] * 2
    for r in range(args.rounds):
        t = [0.0, 0.0]
        for side in (0, 1) if r % 2 == 0 else (1, 0):
            t[side] = run(side)
            best[side] = min(best[side], t[side])
        ratios.append(t[0] / t[1])
        print(
            f"  round {r + 1}: gguf {t[0] * 1e3:.2f} ms, repacked {t[1] * 1e3:.2f} ms", flush=True
        )
    q1, med, q3 = np.percentile(ratios, [25, 50, 75])
    print(f"one-token MoE, {cpu_kernels.threads()} threads: best gguf {best[0] * 1e3:.2f} ms / "
          f"repacked {best[1] * 1e3:.2f} ms per call; repacked speed-up per round, median "
          f"[quartiles]: {med:.2f}x [{q1:.2f}..{q3:.2f}]; outputs differ by {rel:.1e} of "
          f"their largest magnitude")  # fmt: skip


if __name__ == "__main__":
    main()
