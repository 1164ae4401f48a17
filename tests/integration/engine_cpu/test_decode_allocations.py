"""A steady-state decode step makes no heap allocation in native code.

Every buffer of the native forward comes from the calling thread's scratch arena
(native/cpu/cpu_scratch.c), which keeps its size between calls. Checked from outside:
a preloaded shim counts malloc/calloc/realloc/posix_memalign/aligned_alloc calls whose
return address lies in ds4._native_cpu, over decode steps that emit compressed rows
and run the indexer's top-k, after two warm-up steps. Releasing the arena first must
make the count positive (the shim does see the arena's allocations). The counted
positions (42..49) stay clear of the next doubling of the C-owned state arrays
(native/cpu/fwd_seq.c), which allocates by design.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not (shutil.which("cc") or shutil.which("gcc")),
    reason="needs glibc's __libc_* allocators and a C compiler",
)

SHIM = r"""
#include <stddef.h>
#include <stdint.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static uintptr_t lo, hi;
static volatile int on;
static long count;
void shim_start(uintptr_t l, uintptr_t h) { lo = l; hi = h; count = 0; on = 1; }
long shim_stop(void) { on = 0; return count; }
#define NOTE() do { uintptr_t ra = (uintptr_t)__builtin_return_address(0); \
    if (on && ra >= lo && ra < hi) __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED); } while (0)
void *malloc(size_t n) { NOTE(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { NOTE(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { NOTE(); return __libc_realloc(p, n); }
void *aligned_alloc(size_t a, size_t n) { NOTE(); return __libc_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
    NOTE();
    void *p = __libc_memalign(a, n);
    if (!p) return 12;
    *out = p;
    return 0;
}
"""

PROBE = r"""
import ctypes, sys
import numpy as np
import ds4._native_cpu as native
from ds4.adapters.compute.cpu import open_cpu_runner

path = native.__file__
spans = []
for line in open("/proc/self/maps"):
    parts = line.split()
    if len(parts) >= 6 and parts[5] == path:
        a, b = (int(x, 16) for x in parts[0].split("-"))
        spans.append((a, b))
lo, hi = min(a for a, _ in spans), max(b for _, b in spans)
shim = ctypes.CDLL(None)
shim.shim_start.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
shim.shim_stop.restype = ctypes.c_long

runner = open_cpu_runner(sys.argv[1], numerics=sys.argv[2])
session = runner.new_session(128)
prompt = [int(t) for t in np.random.default_rng(1).integers(0, 129_280, 40)]
logits = session.prefill(prompt)
for _ in range(2):  # warm-up: the arena grows to the decode step's size
    logits = session.eval(int(np.argmax(logits)))
shim.shim_start(lo, hi)
for _ in range(8):  # two compressed-row emissions per compressor, top-k every step
    logits = session.eval(int(np.argmax(logits)))
steady = shim.shim_stop()
native.lib.ds4_scratch_release()
shim.shim_start(lo, hi)
session.eval(int(np.argmax(logits)))
print(steady, shim.shim_stop())
"""


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("shim")
    (out / "shim.c").write_text(SHIM)
    cc = shutil.which("cc") or "gcc"
    result = subprocess.run(
        [cc, "-O1", "-shared", "-fPIC", "-o", str(out / "shim.so"), str(out / "shim.c")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return out / "shim.so"


@pytest.mark.parametrize(("model", "numerics"), [("q2", "ds4"), ("q2", "exact"), ("f32", "fp32")])
def test_decode_steps_allocate_nothing(
    shim: Path, model: str, numerics: str, tiny_q2: Path, tiny_f32: Path
) -> None:
    path = tiny_q2 if model == "q2" else tiny_f32
    env = {**os.environ, "LD_PRELOAD": str(shim)}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(path), numerics],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    steady, after_release = (int(x) for x in result.stdout.split())
    assert steady == 0
    assert after_release > 0
