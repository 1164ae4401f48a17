"""The native CPU kernels of the working tree against a previous git revision, side by side
in one process: per weight type and shape, decode streaming from memory (rotating over
768 MiB of copies), decode with the weights in cache (the first 1.5 MiB of rows,
repeated), prefill GMAC/s (n tokens) next to the probed int8 peak, and the fixed cost of
one small call (C entry, with the pool spinning, and through the Python wrapper).

The old revision's native/ tree is compiled into a second cffi module (same builder, same
flags) and loaded next to the working tree's ds4._native_cpu; both are driven through
their public ds4_cpu_matmul with the same weight bytes and activations, the same pool
size, old and new alternating which goes first in every round. Each row prints the best
round of each side, new/old of the best rounds and the median [quartiles] of the
per-round ratios, so machine load shows as noise instead of as a speed-up (many short
rounds: the best ones ran with the core to themselves). Outputs are checked
against each other (within the f32 order bound) before any timing.

Run: PYTHONPATH=src:. .venv/bin/python bench/kernel_vs_previous_bench.py [--rev main]
[--rounds 15] [--threads 2] [--only decode|x8|prefill|fixed]
(x8: Q2_K decode, the old row kernels against the rows interleaved by 8, ADR 0067)
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
from bench.cpu_kernels_bench import random_blocks

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.domain.gguf.ggml_types import GGMLType

ROOT = Path(__file__).resolve().parent.parent
U8 = npt.NDArray[np.uint8]
F32 = npt.NDArray[np.float32]
Q8, Q2K, IQ2 = GGMLType.Q8_0, GGMLType.Q2_K, GGMLType.IQ2_XXS
# (type, cols = k, rows = m): the shapes of issue 25's ggml comparison
SHAPES = [(Q8, 4096, 1024), (Q8, 8192, 4096), (Q2K, 2048, 4096), (IQ2, 4096, 2048)]
STREAM_BYTES = 768 << 20  # rotated copies: beyond the last-level cache of most machines
HOT_BYTES = 3 << 19  # the "cache" rows: 1.5 MiB, within two cores' L2


def build_old(rev: str, tmp: Path) -> ModuleType:
    """Compile rev's native CPU module as `_old_native_cpu` in tmp and import it."""
    tar = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "native"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(tmp, filter="data")
    builder = (tmp / "native" / "build" / "cpu_build.py").read_text(encoding="utf-8")
    builder = builder.replace('"ds4._native_cpu"', '"_old_native_cpu"')
    scope: dict[str, Any] = {"__file__": str(tmp / "native" / "build" / "cpu_build.py")}
    cwd = Path.cwd()
    os.chdir(tmp)
    try:
        exec(compile(builder, "cpu_build.py", "exec"), scope)
        so = str(tmp / scope["ffibuilder"].compile(tmpdir="."))
    finally:
        os.chdir(cwd)
    spec = importlib.util.spec_from_file_location("_old_native_cpu", so)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Side:
    """One module's ds4_cpu_matmul bound to fixed weights / activations / output."""

    def __init__(self, mod: Any) -> None:
        self.ffi, self.lib = mod.ffi, mod.lib

    def call(self, t: int, w: U8, rows: int, cols: int, x: F32, y: F32) -> Callable[..., int]:
        """ds4_cpu_matmul on fixed buffers; the optional argument offsets the weights."""
        ffi, lib = self.ffi, self.lib
        wp = ffi.cast("uint8_t *", w.ctypes.data)
        xp = ffi.cast("float *", x.ctypes.data)
        yp = ffi.cast("float *", y.ctypes.data)
        stride, n_tok = w.shape[-1], x.size // cols

        def run(off: int = 0) -> int:
            return int(lib.ds4_cpu_matmul(t, wp + off, stride, rows, cols, xp, n_tok, yp, 0))

        return run


def alternate(
    old: Callable[[], object], new: Callable[[], object], rounds: int, reps: int
) -> tuple[float, float, list[float]]:
    """Best seconds per call of old and new, and the per-round old/new ratios."""
    best = [float("inf"), float("inf")]
    ratios = []
    for r in range(rounds):
        pair = [0.0, 0.0]
        for side in (0, 1) if r % 2 else (1, 0):
            fn = (old, new)[side]
            fn()
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            pair[side] = (time.perf_counter() - t0) / reps
            best[side] = min(best[side], pair[side])
        ratios.append(pair[0] / pair[1])
    return best[0], best[1], ratios


def spread(ratios: list[float]) -> str:
    """Median and quartiles of the per-round old/new ratios."""
    q1, med, q3 = np.percentile(ratios, [25, 50, 75])
    return f"{med:.2f} [{q1:.2f}..{q3:.2f}]"


def check_agree(t: GGMLType, sides: list[Side], w: U8, rows: int, cols: int, x: F32) -> None:
    ys = [np.zeros(x.size // cols * rows, np.float32) for _ in sides]
    for side, y in zip(sides, ys, strict=True):
        assert side.call(int(t), w, rows, cols, x, y)() == 0
    scale = float(np.abs(ys[0]).max()) + 1e-30
    if float(np.abs(ys[0] - ys[1]).max()) > 1e-4 * scale:
        sys.exit(f"{t.name} {cols}x{rows}: old and new kernels disagree")


def decode_rows(sides: list[Side], rounds: int) -> None:
    rng = np.random.default_rng(1)
    print(
        "\ndecode (one token), GB/s of weights in the best round; new/old of the best rounds;"
        " median [quartiles] of the per-round ratios"
    )
    print(f"{'type':8s} {'k x m':>11s} {'case':7s} {'old':>7s} {'new':>7s}  new/old  per-round")
    for t, cols, rows in SHAPES:
        w = random_blocks(t, rows, cols, rng)
        x = rng.standard_normal(cols).astype(np.float32)
        check_agree(t, sides, w, rows, cols, x)
        copies = max(2, STREAM_BYTES // w.nbytes)
        big = np.concatenate([w] * copies)  # rows of copy i start at i * w.nbytes
        y = np.zeros(rows, np.float32)
        hot_rows = min(rows, HOT_BYTES // w.shape[1])
        for case in ("stream", "cache"):
            fns = []
            for side in sides:
                if case == "cache":
                    fns.append(side.call(int(t), w, hot_rows, cols, x, y))
                    continue
                run = side.call(int(t), big, rows, cols, x, y)
                state = {"i": 0}

                def rotate(
                    run: Callable[[int], int] = run,
                    s: dict[str, int] = state,
                    n: int = copies,
                    step: int = w.nbytes,
                ) -> int:
                    s["i"] = (s["i"] + 1) % n
                    return run(s["i"] * step)

                fns.append(rotate)
            nbytes = w.nbytes if case == "stream" else hot_rows * w.shape[1]
            # many short rounds: the best of them ran with the core to itself
            reps = 8 if case == "stream" else 10
            t_old, t_new, ratios = alternate(
                fns[0], fns[1], rounds * (3 if case == "stream" else 7), reps
            )
            gb = nbytes / 1e9
            print(f"{t.name:8s} {cols:5d}x{rows:<5d} {case:7s} {gb / t_old:7.1f} {gb / t_new:7.1f}"
                  f"  {t_old / t_new:6.2f}x  {spread(ratios)}")  # fmt: skip
        del big


def rotating(run: Callable[[int], int], step: int, copies: int) -> Callable[[], int]:
    """run(offset) over `copies` copies `step` bytes apart, the next copy every call."""
    i = [0]

    def call() -> int:
        i[0] = (i[0] + 1) % copies
        return run(i[0] * step)

    return call


def decode_x8_rows(sides: list[Side], rounds: int) -> None:
    """Q2_K 2048x4096 decode: the old revision's matmul on the GGUF rows against this
    tree's kernel over the same rows interleaved by 8 (ADR 0067), streaming and in cache."""
    from ds4.adapters.compute import cpu_kernels as ck

    if "avx512" not in ck.available_impls():
        print("\nQ2_K x8: no AVX-512 set on this CPU, row skipped")
        return
    rng = np.random.default_rng(4)
    cols, rows = 2048, 4096
    w = random_blocks(Q2K, rows, cols, rng)
    packed = ck.q2k_x8_repack(w)
    x = rng.standard_normal(cols).astype(np.float32)
    y = np.zeros(rows, np.float32)
    y_old = np.zeros(rows, np.float32)
    lib, ffi = sides[1].lib, sides[1].ffi
    xp = ffi.cast("float *", x.ctypes.data)
    assert sides[0].call(int(Q2K), w, rows, cols, x, y_old)() == 0
    if float(np.abs(ck.q2k_x8_matvec(packed, x) - y_old).max()) > 1e-4 * float(np.abs(y_old).max()):
        sys.exit("Q2_K x8: the interleaved kernel disagrees with the old row kernel")
    copies = max(2, STREAM_BYTES // w.nbytes)
    big_old, big_new = np.concatenate([w] * copies), np.concatenate([packed] * copies)
    hot_rows = HOT_BYTES // w.shape[1] // 8 * 8
    print(f"\nQ2_K {cols}x{rows} decode: old = matmul on GGUF rows, new = x8 interleaved "
          f"(ADR 0067); load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    for case in ("stream", "cache"):
        stream = case == "stream"
        n = rows if stream else hot_rows
        run_old = sides[0].call(int(Q2K), big_old if stream else w, n, cols, x, y)
        base = ffi.cast("uint8_t *", (big_new if stream else packed).ctypes.data)
        yp = ffi.cast("float *", y.ctypes.data)
        step = w.nbytes if stream else 0  # rotate over the copies when streaming
        old_fn = rotating(run_old, step, copies)

        def run_new(off: int, n: int = n, b: Any = base, yp: Any = yp) -> int:
            return int(lib.ds4_cpu_q2k_x8_matvec(b + off, n, cols, xp, yp, 0))

        new_fn = rotating(run_new, step, copies)
        reps = 8 if stream else 10
        t_old, t_new, ratios = alternate(old_fn, new_fn, rounds * (3 if stream else 7), reps)
        gb = n * w.shape[1] / 1e9
        load = os.getloadavg()[0]
        print(f"{'Q2_K x8':8s} {cols:5d}x{n:<5d} {case:7s} {gb / t_old:7.1f} {gb / t_new:7.1f}"
              f"  {t_old / t_new:6.2f}x  {spread(ratios)}  (load {load:.1f})")  # fmt: skip
    del big_old, big_new


def prefill_rows(sides: list[Side], rounds: int, n_tok: int, int8_peak: float) -> None:
    rng = np.random.default_rng(2)
    print(f"\nprefill ({n_tok} tokens), GMAC/s; int8 SIMD peak probe {int8_peak / 1e9:.1f} GMAC/s")
    print(f"{'type':8s} {'k x m':>11s} {'old':>7s} {'new':>7s}  new/old  spread")
    for t, cols, rows in SHAPES:
        w = random_blocks(t, rows, cols, rng)
        x = rng.standard_normal(n_tok * cols).astype(np.float32)
        check_agree(t, sides, w, rows, cols, x)
        y = np.zeros(n_tok * rows, np.float32)
        fns = [side.call(int(t), w, rows, cols, x, y) for side in sides]
        t_old, t_new, ratios = alternate(fns[0], fns[1], max(3, rounds // 2), 1)
        macs = rows * cols * n_tok / 1e9
        print(f"{t.name:8s} {cols:5d}x{rows:<5d} {macs / t_old:7.1f} {macs / t_new:7.1f}"
              f"  {t_old / t_new:6.2f}x  {spread(ratios)}")  # fmt: skip


def fixed_cost_rows(sides: list[Side], rounds: int) -> None:
    """Microseconds per call of products too small to be bandwidth- or compute-bound:
    the C entry through cffi (old, new, new with the pool spinning 30 us between jobs)
    and new through the Python wrapper: cpu_kernels.matvec, and a prepared product's
    matvec (weights checked once, output buffer passed in)."""
    from ds4.adapters.compute import cpu_kernels as ck

    rng = np.random.default_rng(3)
    print("\nfixed cost per call, microseconds, best round (spin: workers spin 30 us)")
    print(f"{'type':8s} {'k x m':>11s} {'old':>7s} {'new':>7s} {'spin':>7s} {'python':>7s}"
          f" {'prep.':>7s}  new/old  per-round")  # fmt: skip
    # 32x1: one block, one row, so nearly all of its time is the fixed cost itself
    for t, cols, rows in ((Q8, 32, 1), (Q8, 256, 64), (Q8, 512, 256), (Q8, 1024, 512)):
        w = random_blocks(t, rows, cols, rng)
        x = rng.standard_normal(cols).astype(np.float32)
        y = np.zeros(rows, np.float32)
        fns = [side.call(int(t), w, rows, cols, x, y) for side in sides]
        t_old, t_new, ratios = alternate(fns[0], fns[1], rounds, 2000)
        ck.set_pool_spin_us(30)
        _, t_spin, _ = alternate(fns[0], fns[1], max(3, rounds // 3), 2000)
        ck.set_pool_spin_us(0)

        def wrapped(w: U8 = w, x: F32 = x, t: GGMLType = t) -> object:
            return ck.matvec(w, t, x)

        _, t_py, _ = alternate(fns[0], wrapped, max(3, rounds // 3), 2000)
        product, out = ck.prepare(w, t, cols), np.empty(rows, np.float32)

        def prepared(p: ck.PreparedProduct = product, x: F32 = x, out: F32 = out) -> object:
            return p.matvec(x, out)

        _, t_prep, _ = alternate(fns[0], prepared, max(3, rounds // 3), 2000)
        print(f"{t.name:8s} {cols:5d}x{rows:<5d} {t_old * 1e6:7.2f} {t_new * 1e6:7.2f}"
              f" {t_spin * 1e6:7.2f} {t_py * 1e6:7.2f} {t_prep * 1e6:7.2f}"
              f"  {t_old / t_new:6.2f}x  {spread(ratios)}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rev", default="main", help="git revision of the old native/ tree")
    parser.add_argument("--rounds", type=int, default=15, help="alternating rounds per row")
    parser.add_argument("--threads", type=int, default=2, help="pool size of both sides")
    parser.add_argument("--prefill", type=int, default=512, help="tokens of the prefill rows")
    parser.add_argument("--only", choices=("decode", "x8", "prefill", "fixed"), default=None)
    args = parser.parse_args()
    if not 1 <= args.rounds <= 1000 or not 1 <= args.threads <= 256 or args.prefill < 1:
        parser.error("--rounds 1..1000, --threads 1..256, --prefill >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        old = build_old(args.rev, Path(tmp))
        sides = [Side(old), Side(_native_cpu)]
        for side in sides:
            assert side.lib.ds4_cpu_set_threads(args.threads) == 0
        new_impl = {2: "avx2", 3: "neon", 4: "avx512"}.get(int(_native_cpu.lib.ds4_cpu_best_impl()))
        print(f"old = {args.rev}:native/, new = working tree (auto kernels: {new_impl}); "
              f"{args.threads} threads, {os.cpu_count()} CPUs")  # fmt: skip
        if args.only in (None, "decode"):
            decode_rows(sides, args.rounds)
        if args.only in (None, "decode", "x8"):
            decode_x8_rows(sides, args.rounds)
        if args.only in (None, "prefill"):
            iters = 1 << 22
            n = int(_native_cpu.lib.ds4_cpu_probe_macs(0, iters))
            t0 = time.perf_counter()
            n = int(_native_cpu.lib.ds4_cpu_probe_macs(0, iters))
            peak = n / (time.perf_counter() - t0)
            prefill_rows(sides, args.rounds, args.prefill, peak)
        if args.only in (None, "fixed"):
            fixed_cost_rows(sides, args.rounds)


if __name__ == "__main__":
    main()
