"""Side-by-side speed of the routed-expert AVX2 dot kernels (IQ2_XXS, Q2_K) against a git
revision of native/cpu/cpu_dot_avx2.c, on one thread, in one process.

Both versions (and the scalar reference) are compiled into one temporary cffi module with
the package's flags; old and new run in alternating order, and the report is the best
trial of each plus old/new time as a speed ratio, so machine load shifts both sides alike
(scalar runs once, as the reference the outputs are checked against: new == old == scalar
up to f32 order). "hot" rows (256 KiB) stay in L2 and repeat 16 times per trial, 10 trials
per round (pure compute); "stream" rows are a 64 MiB buffer read once per round (the
decode case). Run: .venv/bin/python bench/expert_kernels_bench.py [--rev HEAD] [--rounds 7]
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import numpy as np
import numpy.typing as npt
from cffi import FFI

ROOT = Path(__file__).resolve().parent.parent
CPU = ROOT / "native" / "cpu"
IQ2, Q2K = 16, 10  # GGML type ids
# type -> (block values, block bytes, offsets of f16 scale fields)
GEOMETRY = {IQ2: (256, 66, (0,)), Q2K: (256, 84, (80, 82))}
NAMES = ("scalar", "old", "new")
U8 = npt.NDArray[np.uint8]

DRIVER = """
#include "cpu_internal.h"
extern const ds4_dot_table ds4_dots_avx2_old;
static const ds4_dot_table *pick(int which) {
    return which == 0 ? &ds4_dots_scalar : which == 1 ? &ds4_dots_avx2_old : &ds4_dots_avx2;
}
void bench_init(void) { ds4_cpu_tables_init(); }
void bench_rows(int which, int type, const uint8_t *w, size_t row_bytes, size_t rows,
                const void *act, size_t cols, float *out, int reps) {
    ds4_dot_fn fn = type == 16 ? pick(which)->iq2_xxs : pick(which)->q2_k;
    for (int r = 0; r < reps; r++)
        for (size_t i = 0; i < rows; i++) out[i] = fn(w + i * row_bytes, act, cols);
}
"""
CDEF = """
typedef struct { float d; int8_t q[256]; int16_t bsums[16]; } ds4_block_q8k;
int ds4_cpu_quantize_q8k(const float *x, size_t n, ds4_block_q8k *out);
void bench_init(void);
void bench_rows(int which, int type, const uint8_t *w, size_t row_bytes, size_t rows,
                const void *act, size_t cols, float *out, int reps);
"""


def build(rev: str, tmp: Path) -> ModuleType:
    """Compile scalar + old (rev) + working-tree AVX2 kernels into one module."""
    old = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:native/cpu/cpu_dot_avx2.c"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    old_c = tmp / "cpu_dot_avx2_old.c"
    old_c.write_text("#define ds4_dots_avx2 ds4_dots_avx2_old\n" + old)
    ffi = FFI()
    ffi.cdef(CDEF)
    srcs = ["cpu_actquant.c", "cpu_dot_scalar.c", "cpu_tables.c", "cpu_dot_avx2.c"]
    ffi.set_source(
        "_expert_bench",
        DRIVER,
        sources=[str(CPU / s) for s in srcs] + [str(old_c)],
        include_dirs=[str(CPU), str(ROOT / "native" / "common")],
        extra_compile_args=["-O2", "-std=c11", "-ffp-contract=off", "-D_GNU_SOURCE"],
        extra_link_args=["-pthread"],
    )
    so = ffi.compile(tmpdir=str(tmp))
    spec = importlib.util.spec_from_file_location("_expert_bench", so)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.lib.bench_init()
    return mod


def random_rows(ggml_type: int, rows: int, cols: int, rng: np.random.Generator) -> U8:
    values, nbytes, fields = GEOMETRY[ggml_type]
    raw = rng.integers(0, 256, (rows, cols // values, nbytes), dtype=np.uint8)
    for off in fields:
        scale = (rng.random(raw.shape[:2]) * 0.01 + 0.001).astype(np.float16)
        raw[:, :, off : off + 2] = scale.view(np.uint8).reshape(*raw.shape[:2], 2)
    return raw.reshape(rows, -1)


def measure(
    mod: ModuleType, ggml_type: int, cols: int, rows: int, reps: int, rounds: int
) -> tuple[dict[str, float], float]:
    ffi, lib = mod.ffi, mod.lib
    rng = np.random.default_rng(1)
    w = random_rows(ggml_type, rows, cols, rng)
    x = rng.standard_normal(cols).astype(np.float32)
    act = ffi.new("ds4_block_q8k[]", cols // 256)
    assert lib.ds4_cpu_quantize_q8k(ffi.from_buffer("float[]", x), cols, act) == 0
    outs = {n: np.empty(rows, dtype=np.float32) for n in NAMES}
    wp = ffi.from_buffer("uint8_t[]", w)
    best = dict.fromkeys(NAMES, float("inf"))
    # scalar (the reference, slow) once; old and new alternate which goes first
    order = [0] + [k for r in range(rounds) for k in ((1, 2) if r % 2 else (2, 1))]
    for which in order:
        name = NAMES[which]
        op = ffi.from_buffer("float[]", outs[name])
        t0 = time.perf_counter()
        lib.bench_rows(which, ggml_type, wp, w.shape[1], rows, act, cols, op, reps)
        best[name] = min(best[name], time.perf_counter() - t0)
    ref = outs["scalar"].astype(np.float64)
    tol = 1e-5 * np.abs(ref).max() + 1e-30
    for name in ("old", "new"):
        if np.abs(outs[name] - ref).max() > tol:
            sys.exit(f"{name} kernel disagrees with scalar (type {ggml_type})")
    gbs = {n: w.nbytes * reps / t / 1e9 for n, t in best.items()}
    return gbs, best["old"] / best["new"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rev", default="HEAD", help="git revision of the old kernel file")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mod = build(args.rev, Path(tmp))
        print(f"one thread; old = {args.rev}:native/cpu/cpu_dot_avx2.c, new = working tree")
        print("GB/s of weights, best round")
        print(f"{'kernel':10s} {'case':7s} {'scalar':>8s} {'old':>8s} {'new':>8s}  new/old")
        for ggml_type, name, cols in ((IQ2, "IQ2_XXS", 4096), (Q2K, "Q2_K", 2048)):
            row_bytes = cols // 256 * GEOMETRY[ggml_type][1]
            hot_rows = (256 << 10) // row_bytes
            stream_rows = (64 << 20) // row_bytes
            for case, rows, reps, rounds in (
                ("hot", hot_rows, 16, 10 * args.rounds),
                ("stream", stream_rows, 1, args.rounds),
            ):
                gbs, ratio = measure(mod, ggml_type, cols, rows, reps, rounds)
                cells = " ".join(f"{gbs[n]:8.2f}" for n in NAMES)
                print(f"{name:10s} {case:7s} {cells}  {ratio:5.2f}x")


if __name__ == "__main__":
    main()
