"""Single-thread matvec speed of the K-quant dot kernels, per instruction set.

A 2048 x 4096 weight of each K-quant type (random codes, small f16 scales) times one
activation, through `cpu_kernels.matvec` with each implementation this CPU runs; prints
weight GB/s and values/ns, best of --repeat. Run: .venv/bin/python bench/kquant_matvec_bench.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ds4.adapters.compute import cpu_kernels as ck
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType

TYPES = (GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K)
# Offsets of each block's f16 scale fields.
SCALES = {GGMLType.Q2_K: (80, 82), GGMLType.Q3_K: (108,), GGMLType.Q4_K: (0, 2),
          GGMLType.Q5_K: (0, 2), GGMLType.Q6_K: (208,)}  # fmt: skip


def weights(t: GGMLType, rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    geo = BLOCK_GEOMETRY[t]
    raw = rng.integers(0, 256, (rows, cols // geo.elements, geo.nbytes), dtype=np.uint8)
    for off in SCALES[t]:
        scale = (rng.random(raw.shape[:2]) * 0.01 + 0.001).astype(np.float16)
        raw[:, :, off : off + 2] = scale.view(np.uint8).reshape(*raw.shape[:2], 2)
    return raw.reshape(rows, -1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2048)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(args.cols).astype(np.float32)
    impls = [i for i in ck.available_impls() if i != "auto"]
    print("| type | " + " | ".join(f"{i} GB/s (values/ns)" for i in impls) + " |")
    for t in TYPES:
        raw = weights(t, args.rows, args.cols, rng)
        cells = []
        for impl in impls:
            ck.matvec(raw, t, x, impl=impl, threads=1)
            best = float("inf")
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                ck.matvec(raw, t, x, impl=impl, threads=1)
                best = min(best, time.perf_counter() - t0)
            values = args.rows * args.cols / best / 1e9
            cells.append(f"{raw.nbytes / best / 1e9:.2f} ({values:.1f})")
        print(f"| {t.name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
