"""The indexer's top-k selection: the bounded heap the forward runs (ds4_fw_topk_mask)
against the full sort it replaced (ds4_fw_topk_mask_fullsort), side by side.

Flash keeps 512 of up to 64K compressed rows (256K tokens / ratio 4) per token and
layer; the scores here are random normals (the typical case), heavy ties, and an
ascending run (the heap's worst case: every row enters it). The two masks are
checked equal on every input.

Run (from the repository root): .venv/bin/python -m bench.indexer_select_bench
[--rows 65536] [--top-k 512] [--repeat 20]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4 import _native_cpu  # type: ignore[attr-defined]

_ffi, _lib = _native_cpu.ffi, _native_cpu.lib
F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]


def timed(
    fn: Callable[[Any, int, int, Any], int], scores: F32, k: int, repeat: int
) -> tuple[float, U8]:
    allowed = np.zeros(scores.size, dtype=np.uint8)
    sp = _ffi.cast("const float *", _ffi.from_buffer(scores))
    ap = _ffi.cast("unsigned char *", _ffi.from_buffer(allowed))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        rc = fn(sp, scores.size, k, ap)
        times.append(time.perf_counter() - t0)
        assert rc == 0
    return float(np.median(times)), allowed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=65536, help="compressed rows scored")
    ap.add_argument("--top-k", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=20, help="runs per method (median shown)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n = args.rows
    inputs = {
        "random normal": rng.standard_normal(n).astype(np.float32),
        "ties (8 values)": rng.integers(0, 8, n).astype(np.float32),
        "ascending (worst)": np.arange(n, dtype=np.float32),
    }
    print(f"top-{args.top_k} of {n} rows, median of {args.repeat} runs")
    print(f"{'scores':<20} {'full sort':>12} {'heap':>12} {'speed-up':>9}")
    for name, scores in inputs.items():
        t_old, m_old = timed(_lib.ds4_fw_topk_mask_fullsort, scores, args.top_k, args.repeat)
        t_new, m_new = timed(_lib.ds4_fw_topk_mask, scores, args.top_k, args.repeat)
        assert np.array_equal(m_old, m_new), name
        print(f"{name:<20} {t_old * 1e6:>9.0f} us {t_new * 1e6:>9.0f} us {t_old / t_new:>8.1f}x")


if __name__ == "__main__":
    main()
