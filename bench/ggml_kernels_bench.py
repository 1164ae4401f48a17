"""Our forward-path CPU kernels against ggml's on the same bytes, in one process, for every
Flash weight shape and type of the q2 mix.

    PYTHONPATH=src:. .venv/bin/python -m bench.ggml_kernels_bench [--threads 2] [--rounds 7]
        [--prefill 64,512] [--cases stream,cache,prefill] [--head] [--types Q4_K,MXFP4]
        [--type-shapes experts|all] [--rows NAME,...] [--impl auto] [--ggml-lib DIR]

ggml is the peer llama.cpp's build (libggml.so, libggml-base.so, libggml-cpu.so; by
default $DS4_PEER_CACHE/llama.cpp-build/bin, built by tools/peer/build_llamacpp.sh),
driven through its public C API with ctypes: 2-D weight tensors of the type (3-D for
attn_output_a's 8 groups, as llama.cpp's graph multiplies it), one ggml_mul_mat graph per
weight copy, computed by the CPU backend (ggml_backend_cpu_init) on --threads threads.
ggml's weights live in the plain CPU buffer (a ggml_backend_cpu_buffer_from_ptr over the
very bytes our side reads) and in each extra buffer type of the CPU device
(ggml_backend_dev_get_extra_bufts, or --bufts): CPU_REPACK, which repacks a tensor into
ggml's interleaved layout at ggml_backend_tensor_set for the types and shapes it has one
for on this CPU, and AMX where the build has it. An extra type is first tried per weight
type on a small product in a child process (AMX tiles fault in a VM that lists them but
does not enable them) and left out, with a note, where that fails.

Our side is the forward's entry points over the same bytes and activations, same thread
count: PreparedProduct (matvec / matmul, what the native forward's ds4_fw_matmul calls)
for every type in the GGUF layout, and for the routed Q2_K down projection also the
AVX-512 kernel over rows interleaved by 8 (docs/adr/0067-q2k-row-interleaved-repack.md;
its prefill is one matvec per token, as the forward runs it pair by pair).

Cases per row: `stream`, decode (one token, matrix x vector) with the weights rotated over
copies larger than the last-level cache, every call reading the least recently used copy;
`cache`, decode over the first 1.5 MiB of rows, repeated; `ppN`, a prefill tile of N
tokens over the whole matrix. Before timing a case every side's output is checked against
ggml's (max |ours - ggml| / max |ggml| under 1e-2: the two quantize the activation with
slightly different scales) so a wrong kernel cannot be timed. Each round times every side
(`reps` calls after one untimed call, with a pause between sides so one side's spinning
threads are asleep before the next starts), the order alternating by round; the rates are
of the median round, the ratios the median of the per-round speed ratios ours/ggml (above
1: ours is faster). Nothing here is a test; the numbers mean something on a quiet machine
only (the load average is printed on every line).
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import signal
import statistics
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from bench.random_blocks import random_blocks

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.adapters.compute import cpu_kernels as ck
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.quant_formats import FORMATS_BY_TYPE

U8 = npt.NDArray[np.uint8]
F32 = npt.NDArray[np.float32]
Q8, IQ2, Q2K = GGMLType.Q8_0, GGMLType.IQ2_XXS, GGMLType.Q2_K
HOT_BYTES = 3 << 19  # the "cache" rows: 1.5 MiB, within two cores' L2
MIN_STREAM_BYTES = 768 << 20
MAX_REL_ERR = 1e-2  # quantized-activation noise between the two sides is ~1e-3
RANDOM_BLOCK_TYPES = frozenset({GGMLType.F16, Q8, IQ2, Q2K, GGMLType.Q4_K})
GGML_TYPE_F32 = 0
GGML_DEVICE_CPU = 0  # GGML_BACKEND_DEVICE_TYPE_CPU


@dataclass(frozen=True)
class Row:
    """One weight: `rows` outputs over `cols` inputs (k x m), as `groups` equal products."""

    name: str
    kind: GGMLType
    cols: int
    rows: int
    groups: int = 1

    @property
    def shape(self) -> str:
        g = f"{self.groups}x" if self.groups > 1 else ""
        return f"{g}{self.cols}x{self.rows // self.groups}"


# The Flash layer's weights in the q2 mix (bench/cpu_kernels_bench.py, flash_layer_bench.py)
MIX = (
    Row("attn_q_a", Q8, 4096, 1024),
    Row("attn_q_b", Q8, 1024, 32768),
    Row("attn_kv", Q8, 4096, 512),
    Row("attn_output_a", Q8, 4096, 8192, groups=8),
    Row("attn_output_b", Q8, 8192, 4096),
    Row("ffn_gate/up_shexp", Q8, 4096, 2048),
    Row("ffn_down_shexp", Q8, 2048, 4096),
    Row("ffn_gate/up_exps", IQ2, 4096, 2048),
    Row("ffn_down_exps", Q2K, 2048, 4096),
)
HEAD = Row("output", Q8, 4096, 129280)
EXPERT_ROWS = ("ffn_gate/up_exps", "ffn_down_exps")


def round_order(r: int, n: int) -> list[int]:
    """The sides' order in round r: rotated by r // 2, reversed in odd rounds, so over 2n
    rounds every side runs first and last equally often."""
    order = [(k + r // 2) % n for k in range(n)]
    return order[::-1] if r % 2 else order


def median_ratio(ours: Sequence[float], other: Sequence[float]) -> float:
    """Median over rounds of other/ours seconds: ours' speed over the other's."""
    return statistics.median(o / s for s, o in zip(ours, other, strict=True))


def stream_copies(nbytes: int, stream_bytes: int) -> int:
    """How many copies of an nbytes weight fill stream_bytes (at least 2)."""
    return max(2, math.ceil(stream_bytes / nbytes))


def hot_rows(row: Row, row_bytes: int) -> int:
    """Rows of the "cache" case: about HOT_BYTES, a multiple of 32 rows per group (the
    row blocks of ggml's repacked and AMX layouts)."""
    unit = 32 * row.groups
    return max(unit, min(row.rows, HOT_BYTES // row_bytes) // unit * unit)


def max_rel_err(ours: F32, ref: F32) -> float:
    scale = float(np.abs(ref).max())
    err = float(np.abs(ours.astype(np.float64) - ref).max())
    return err / scale if scale > 0 else err


def last_level_cache() -> int:
    """Bytes of the largest CPU cache sysfs reports (0 where it says nothing)."""
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text(encoding="ascii").strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return best


def aligned_bytes(nbytes: int, align: int = 64) -> U8:
    """nbytes of uninitialized memory starting on an `align` boundary."""
    raw = np.empty(nbytes + align, dtype=np.uint8)
    start = -raw.ctypes.data % align
    out: U8 = raw[start : start + nbytes]
    return out


def default_ggml_lib() -> Path:
    env = os.environ.get("DS4_PEER_CACHE")
    cache = (
        Path(env)
        if env
        else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ds4" / "peer"
    )
    return cache / "llama.cpp-build" / "bin"


# ---------------------------------------------------------------- ggml through ctypes


class _InitParams(ctypes.Structure):
    _fields_ = (("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p),
                ("no_alloc", ctypes.c_bool))  # fmt: skip


_P, _SZ, _I64, _I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64, ctypes.c_int
_B, _S = ctypes.c_bool, ctypes.c_char_p
# name: (result, arguments), from ggml.h, ggml-alloc.h, ggml-backend.h and ggml-cpu.h
_LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_SIGNATURES: dict[str, tuple[Any, tuple[Any, ...]]] = {
    "ggml_init": (_P, (_InitParams,)),
    "ggml_free": (None, (_P,)),
    "ggml_tensor_overhead": (_SZ, ()),
    "ggml_graph_overhead_custom": (_SZ, (_SZ, _B)),
    "ggml_new_tensor_2d": (_P, (_P, _I, _I64, _I64)),
    "ggml_new_tensor_3d": (_P, (_P, _I, _I64, _I64, _I64)),
    "ggml_mul_mat": (_P, (_P, _P, _P)),
    "ggml_new_graph_custom": (_P, (_P, _SZ, _B)),
    "ggml_build_forward_expand": (None, (_P, _P)),
    "ggml_row_size": (_SZ, (_I, _I64)),
    "ggml_type_name": (_S, (_I,)),
    "ggml_quantize_chunk": (_SZ, (_I, _P, _P, _I64, _I64, _I64, _P)),
    "ggml_quantize_requires_imatrix": (_B, (_I,)),
    "ggml_log_set": (None, (_LOG_CALLBACK, _P)),
    "ggml_cpu_init": (None, ()),
    "ggml_cpu_has_avx2": (_I, ()),
    "ggml_cpu_has_avx512": (_I, ()),
    "ggml_cpu_has_avx512_vnni": (_I, ()),
    "ggml_cpu_has_avx512_vbmi": (_I, ()),
    "ggml_backend_cpu_init": (_P, ()),
    "ggml_backend_cpu_set_n_threads": (None, (_P, _I)),
    "ggml_backend_graph_compute": (_I, (_P, _P)),
    "ggml_backend_free": (None, (_P,)),
    "ggml_backend_cpu_buffer_type": (_P, ()),
    "ggml_backend_cpu_buffer_from_ptr": (_P, (_P, _SZ)),
    "ggml_backend_buft_name": (_S, (_P,)),
    "ggml_backend_alloc_ctx_tensors_from_buft": (_P, (_P, _P)),
    "ggml_backend_buffer_free": (None, (_P,)),
    "ggml_backend_tensor_alloc": (_I, (_P, _P, _P)),
    "ggml_backend_tensor_set": (None, (_P, _P, _SZ, _SZ)),
    "ggml_backend_tensor_get": (None, (_P, _P, _SZ, _SZ)),
    "ggml_backend_dev_by_type": (_P, (_I,)),
    "ggml_backend_dev_backend_reg": (_P, (_P,)),
    "ggml_backend_reg_get_proc_address": (_P, (_P, _S)),
    "ggml_backend_dev_supports_op": (_B, (_P, _P)),
}
_EXTRA_BUFTS = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)
GGML_LOG_WARN, GGML_LOG_CONT = 3, 5


class _LogFilter:
    """ggml's log without its info lines (one per repacked tensor): warnings and errors
    go to stderr, with their continuation lines."""

    def __init__(self) -> None:
        self.showing = False
        self.callback = _LOG_CALLBACK(self)

    def __call__(self, level: int, text: bytes | None, _user: int | None) -> None:
        if level != GGML_LOG_CONT:
            self.showing = level >= GGML_LOG_WARN
        if self.showing and text:
            sys.stderr.write(text.decode(errors="replace"))


class Ggml:
    """The ggml C API of one build, its CPU backend and its buffer types."""

    def __init__(self, libdir: Path, threads: int) -> None:
        libs = [libdir / f"lib{name}.so" for name in ("ggml-base", "ggml-cpu", "ggml")]
        missing = [str(p) for p in libs if not p.exists()]
        if missing:
            raise SystemExit(f"ggml libraries not found: {', '.join(missing)} (build the "
                             "peer: tools/peer/build_llamacpp.sh, or --ggml-lib)")  # fmt: skip
        handles = [ctypes.CDLL(str(p), mode=ctypes.RTLD_GLOBAL) for p in libs]
        self.fn: dict[str, Any] = {}
        for name, (res, args) in _SIGNATURES.items():
            f = getattr(handles[-1], name)  # libggml.so's dlsym also searches its dependencies
            f.restype, f.argtypes = res, args
            self.fn[name] = f
        self.log = _LogFilter()  # kept: ggml holds the callback pointer
        self.fn["ggml_log_set"](self.log.callback, None)
        self.fn["ggml_cpu_init"]()
        self.backend = self.fn["ggml_backend_cpu_init"]()
        self.fn["ggml_backend_cpu_set_n_threads"](self.backend, threads)
        self.cpu_buft = self.fn["ggml_backend_cpu_buffer_type"]()
        self.device = self.fn["ggml_backend_dev_by_type"](GGML_DEVICE_CPU)
        reg = self.fn["ggml_backend_dev_backend_reg"](self.device)
        addr = self.fn["ggml_backend_reg_get_proc_address"](
            reg, b"ggml_backend_dev_get_extra_bufts"
        )
        self.extra: dict[str, int] = {}
        if addr:
            bufts = _EXTRA_BUFTS(addr)(self.device)
            i = 0
            while bufts[i]:
                self.extra[self.fn["ggml_backend_buft_name"](bufts[i]).decode()] = bufts[i]
                i += 1
        self.compute = self.fn["ggml_backend_graph_compute"]
        self.overhead = int(self.fn["ggml_tensor_overhead"]())
        self.graph_overhead = int(self.fn["ggml_graph_overhead_custom"](8, False))

    def features(self) -> str:
        names = ("avx2", "avx512", "avx512_vnni", "avx512_vbmi")
        have = [n for n in names if self.fn[f"ggml_cpu_has_{n}"]()]
        return " ".join(have) or "none of avx2/avx512"

    def context(self, tensors: int, graphs: int = 0) -> int:
        size = self.overhead * (tensors + 4) + self.graph_overhead * graphs + (1 << 16)
        ctx = self.fn["ggml_init"](_InitParams(size, None, True))
        if not ctx:
            raise SystemExit("ggml_init failed")
        return int(ctx)

    def new_tensor(self, ctx: int, kind: int, cols: int, rows: int, groups: int) -> int:
        if groups == 1:
            return int(self.fn["ggml_new_tensor_2d"](ctx, kind, cols, rows))
        return int(self.fn["ggml_new_tensor_3d"](ctx, kind, cols, rows // groups, groups))

    def row_size(self, kind: int, cols: int) -> int:
        return int(self.fn["ggml_row_size"](kind, cols))

    def type_name(self, kind: int) -> str:
        name = self.fn["ggml_type_name"](kind)
        return name.decode() if name else "?"

    def quantize(self, kind: GGMLType, rows: int, cols: int, rng: np.random.Generator) -> U8:
        """Random normal weights quantized by ggml's own quantizer (types random_blocks
        does not know), 256 rows at a time."""
        row_bytes = self.row_size(int(kind), cols)
        out = np.empty((rows, row_bytes), dtype=np.uint8)
        imatrix = np.ones(cols, np.float32)
        need = bool(self.fn["ggml_quantize_requires_imatrix"](int(kind)))
        for r0 in range(0, rows, 256):
            n = min(256, rows - r0)
            src = (rng.standard_normal((n, cols)) * 0.02).astype(np.float32)
            self.fn["ggml_quantize_chunk"](
                int(kind), src.ctypes.data, out[r0:].ctypes.data, 0, n, cols,
                imatrix.ctypes.data if need else None,
            )  # fmt: skip
        return out


class GgmlWeights:
    """`copies` tensors of one weight in one ggml buffer: over our own bytes (plain CPU
    buffer, `shared`), or allocated from a buffer type and set from `source`."""

    def __init__(
        self, g: Ggml, row: Row, copies: int, rows: int, *, shared: U8 | None = None,
        buft: int | None = None, source: U8 | None = None,
    ) -> None:  # fmt: skip
        self.g, self.row, self.rows = g, row, rows
        self.ctx = g.context(copies)
        self.tensors = [g.new_tensor(self.ctx, int(row.kind), row.cols, rows, row.groups)
                        for _ in range(copies)]  # fmt: skip
        self.keep = shared  # the plain CPU buffer's memory, owned by numpy
        if shared is not None:
            step = shared.nbytes // copies
            self.buffer = g.fn["ggml_backend_cpu_buffer_from_ptr"](
                shared.ctypes.data, shared.nbytes
            )
            for i, t in enumerate(self.tensors):
                if g.fn["ggml_backend_tensor_alloc"](self.buffer, t, shared.ctypes.data + i * step):
                    raise SystemExit("ggml_backend_tensor_alloc failed")
            return
        assert buft is not None and source is not None
        self.buffer = g.fn["ggml_backend_alloc_ctx_tensors_from_buft"](self.ctx, buft)
        if not self.buffer:
            raise SystemExit(f"ggml could not allocate {row.name} ({copies} copies)")
        self.source = source

    def supported(self) -> bool:
        """Whether the CPU device runs a product with these tensors (for CPU_REPACK:
        whether ggml has a repacked layout for the type and shape on this CPU)."""
        g = self.g
        ctx = g.context(2)
        try:
            x = g.new_tensor(ctx, GGML_TYPE_F32, self.row.cols, self.row.groups, self.row.groups)
            node = g.fn["ggml_mul_mat"](ctx, self.tensors[0], x)
            return bool(g.fn["ggml_backend_dev_supports_op"](g.device, node))
        finally:
            g.fn["ggml_free"](ctx)

    def fill(self) -> None:
        """Set every tensor from the source bytes (CPU_REPACK repacks them here)."""
        src = np.ascontiguousarray(self.source)
        for t in self.tensors:
            self.g.fn["ggml_backend_tensor_set"](t, src.ctypes.data, 0, src.nbytes)

    def close(self) -> None:
        self.g.fn["ggml_backend_buffer_free"](self.buffer)
        self.g.fn["ggml_free"](self.ctx)


class GgmlProducts:
    """One mul_mat graph per weight tensor over one activation x (groups, n_tok, cols)."""

    def __init__(self, weights: GgmlWeights, x: F32) -> None:
        g, row = weights.g, weights.row
        self.g, self.weights = g, weights
        n = len(weights.tensors)
        self.ctx = g.context(2 * n + 1, graphs=n)
        # [cols, n_tok] or [cols, n_tok, groups]: the memory order of x
        xt = g.new_tensor(self.ctx, GGML_TYPE_F32, row.cols, x.shape[1] * row.groups, row.groups)
        self.ys, self.graphs = [], []
        for t in weights.tensors:
            y = g.fn["ggml_mul_mat"](self.ctx, t, xt)
            graph = g.fn["ggml_new_graph_custom"](self.ctx, 8, False)
            g.fn["ggml_build_forward_expand"](graph, y)
            self.ys.append(y)
            self.graphs.append(graph)
        self.buffer = g.fn["ggml_backend_alloc_ctx_tensors_from_buft"](self.ctx, g.cpu_buft)
        if not self.buffer:
            raise SystemExit("ggml could not allocate the activations")
        g.fn["ggml_backend_tensor_set"](xt, x.ctypes.data, 0, x.nbytes)
        self.out = np.empty((row.groups, x.shape[1], weights.rows // row.groups), np.float32)

    def run(self, i: int) -> None:
        if self.g.compute(self.g.backend, self.graphs[i]):
            raise SystemExit("ggml_backend_graph_compute failed")

    def output(self, i: int) -> F32:
        self.g.fn["ggml_backend_tensor_get"](self.ys[i], self.out.ctypes.data, 0, self.out.nbytes)
        return self.out

    def close(self) -> None:
        self.g.fn["ggml_backend_buffer_free"](self.buffer)
        self.g.fn["ggml_free"](self.ctx)


# ---------------------------------------------------------------- our side


class OursPrepared:
    """PreparedProducts over each copy's rows (one per group), into one output buffer."""

    def __init__(self, copies: Sequence[U8], row: Row, x: F32, impl: str) -> None:
        per = copies[0].shape[0] // row.groups
        self.out = np.empty((row.groups, x.shape[1], per), np.float32)
        self.calls: list[list[tuple[Callable[..., object], F32, F32]]] = []
        for w in copies:
            calls: list[tuple[Callable[..., object], F32, F32]] = []
            for gi in range(row.groups):
                p = ck.prepare(w[gi * per : (gi + 1) * per], row.kind, row.cols, impl=impl)
                if x.shape[1] == 1:
                    calls.append((p.matvec, x[gi, 0], self.out[gi, 0]))
                else:
                    calls.append((p.matmul, x[gi], self.out[gi]))
            self.calls.append(calls)

    def run(self, i: int) -> None:
        for fn, xg, yg in self.calls[i]:
            fn(xg, yg)

    def output(self, i: int) -> F32:
        return self.out


class OursX8:
    """The AVX-512 Q2_K kernel over rows interleaved by 8, copy i at offset i * step; a
    prefill tile is one matvec per token, as the forward runs it."""

    def __init__(self, packed: U8, copies: int, rows: int, cols: int, x: F32, impl: str) -> None:
        ffi, lib = _native_cpu.ffi, _native_cpu.lib
        self.keep = (packed, x)
        self.n_tok = x.shape[1]
        self.out = np.empty((1, self.n_tok, rows), np.float32)
        base = ffi.cast("uint8_t *", packed.ctypes.data)
        step = packed.nbytes // copies
        self.bases = [base + i * step for i in range(copies)]
        self.xs = [ffi.cast("float *", x[0, t].ctypes.data) for t in range(self.n_tok)]
        self.ys = [ffi.cast("float *", self.out[0, t].ctypes.data) for t in range(self.n_tok)]
        self.fn, self.rows, self.cols = lib.ds4_cpu_q2k_x8_matvec, rows, cols
        self.code = ck.IMPLS[impl]

    def run(self, i: int) -> None:
        w, fn = self.bases[i], self.fn
        for xp, yp in zip(self.xs, self.ys, strict=True):
            if fn(w, self.rows, self.cols, xp, yp, self.code):
                raise SystemExit("ds4_cpu_q2k_x8_matvec failed")

    def output(self, i: int) -> F32:
        return self.out


# ---------------------------------------------------------------- measuring


class Rotor:
    """The next copy to read; sides over the same memory share one, so every call reads
    the copy least recently read by any of them."""

    def __init__(self, n: int) -> None:
        self.n, self.i = n, 0

    def next(self) -> int:
        self.i = (self.i + 1) % self.n
        return self.i


@dataclass
class Side:
    label: str
    product: OursPrepared | OursX8 | GgmlProducts
    rotor: Rotor
    ours: bool

    def call(self) -> None:
        self.product.run(self.rotor.next())


def timed_rounds(sides: Sequence[Side], rounds: int, reps: int, settle: float) -> list[list[float]]:
    """Seconds per call of every side in every round (order alternating by round)."""
    per: list[list[float]] = [[] for _ in sides]
    for r in range(rounds):
        for k in round_order(r, len(sides)):
            time.sleep(settle)  # the previous side's spinning threads go to sleep
            fn = sides[k].call
            fn()
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            per[k].append((time.perf_counter() - t0) / reps)
    return per


def calibrate(side: Side, min_time: float) -> int:
    """Calls per round so that one side's round takes about min_time."""
    side.call()
    t0 = time.perf_counter()
    side.call()
    one = time.perf_counter() - t0
    return max(1, min(10000, round(min_time / max(one, 1e-7))))


def check(row: Row, case: str, sides: list[Side], notes: Notes) -> float:
    """Largest relative difference of our sides from ggml's plain CPU product; exits if one
    is over MAX_REL_ERR (never time a wrong kernel). An extra ggml buffer type whose
    product differs from ggml CPU's by as much is dropped from `sides`, with a note."""
    outputs = {}
    for s in sides:
        s.product.run(0)
        outputs[s.label] = s.product.output(0).copy()
    ref = outputs["CPU"]
    worst = 0.0
    for s in list(sides):
        if s.label == "CPU":
            continue
        err = max_rel_err(outputs[s.label], ref)
        what = f"{row.name} {row.kind.name} {row.shape} {case}"
        if s.ours and not err <= MAX_REL_ERR:
            sys.exit(f"{what}: ours ({s.label}) and ggml CPU disagree (max relative error "
                     f"{err:.2e}); not timing it")  # fmt: skip
        if not s.ours and not err <= MAX_REL_ERR:
            notes.dropped.append(f"{what}: ggml {s.label} differs from ggml CPU by {err:.2e}, "
                                 "not timed")  # fmt: skip
            sides.remove(s)
        elif s.ours:
            worst = max(worst, err)
    return worst


def header(bufts: Sequence[str]) -> str:
    cols = [f"{short(b):>7s}" for b in bufts]
    ratios = [f"{'o/' + short(b):>8s}" for b in bufts]
    return (f"{'row':24s} {'type':7s} {'k x m':>13s} {'case':6s} {'unit':6s} {'ours':>7s} "
            f"{' '.join(cols)} {' '.join(ratios)} {'max err':>8s} load")  # fmt: skip


def short(buft: str) -> str:
    """The column name of a ggml buffer type: cpu, repack, amx, ..."""
    return {"CPU": "cpu", "CPU_REPACK": "repack"}.get(buft, buft.lower())


def report(
    row: Row, case: str, sides: Sequence[Side], times: list[list[float]], bufts: Sequence[str],
    work: float, unit: str, err: float,
) -> None:  # fmt: skip
    """One line per our side: rates of the median round (work / seconds, in units of 1e9)
    and the median per-round speed ratios ours/ggml for every ggml buffer type."""
    by = {s.label: t for s, t in zip(sides, times, strict=True)}

    def rate(t: list[float] | None) -> str:
        return f"{work / statistics.median(t) / 1e9:7.1f}" if t else f"{'-':>7s}"

    load = os.getloadavg()[0]
    for s, t in zip(sides, times, strict=True):
        if not s.ours:
            continue
        name = row.name if s.label == "ours" else f"{row.name} ({s.label})"
        rates = " ".join(rate(by.get(b)) for b in bufts)
        ratios = " ".join(
            f"{median_ratio(t, by[b]):7.2f}x" if b in by else f"{'-':>8s}" for b in bufts
        )
        print(f"{name:24s} {row.kind.name:7s} {row.shape:>13s} {case:6s} {unit:6s} {rate(t)} "
              f"{rates} {ratios} {err:8.1e} {load:4.1f}", flush=True)  # fmt: skip


@dataclass(frozen=True)
class Options:
    threads: int
    rounds: int
    prefill: tuple[int, ...]
    cases: frozenset[str]
    impl: str
    stream_bytes: int
    min_time: float
    settle: float


@dataclass
class Notes:
    """What the table leaves out: per extra buffer type, the products ggml has no layout
    for here; ggml sides dropped for disagreeing; rows skipped."""

    no_layout: dict[str, set[str]] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = list(self.skipped)
        for buft, what in sorted(self.no_layout.items()):
            out.append(f"{short(buft)} '-': ggml's {buft} takes no {', '.join(sorted(what))} "
                       "product here (llama.cpp keeps those in the CPU buffer)")  # fmt: skip
        return out + self.dropped


def weight_bytes(g: Ggml, row: Row, rng: np.random.Generator) -> U8:
    if row.kind in RANDOM_BLOCK_TYPES:
        return random_blocks(row.kind, row.rows, row.cols, rng)
    return g.quantize(row.kind, row.rows, row.cols, rng)


def copies_of(src: U8, copies: int) -> U8:
    """`copies` back-to-back copies of src's bytes, 64-byte aligned."""
    big = aligned_bytes(copies * src.nbytes)
    big.reshape(copies, -1)[:] = src.reshape(1, -1)
    return big


def bench_row(
    g: Ggml, row: Row, opts: Options, bufts: Sequence[str], usable: Sequence[str], notes: Notes
) -> None:
    """Every case of one row: build the sides over the same bytes (ggml: CPU and the
    `usable` extra buffer types), check, time, print (columns: `bufts`)."""
    rng = np.random.default_rng(zlib.crc32(f"{row.name} {row.kind.name}".encode()))
    w = weight_bytes(g, row, rng)
    row_bytes = w.shape[1]
    resolved = ck.best_impl() if opts.impl == "auto" else opts.impl
    x8 = row.kind is Q2K and row.groups == 1 and resolved == "avx512"
    cases: list[tuple[str, int, int]] = []  # (case, copies, tokens)
    if "stream" in opts.cases:
        cases.append(("stream", stream_copies(w.nbytes, opts.stream_bytes), 1))
    if "cache" in opts.cases:
        cases.append(("cache", 1, 1))
    if "prefill" in opts.cases:
        cases += [(f"pp{n}", 1, n) for n in opts.prefill]
    for case, copies, n_tok in cases:
        rows = hot_rows(row, row_bytes) if case == "cache" else row.rows
        sub = Row(row.name, row.kind, row.cols, rows, row.groups)
        src = w[:rows]
        big = copies_of(src, copies)
        views = [big[i * src.nbytes : (i + 1) * src.nbytes].reshape(rows, row_bytes)
                 for i in range(copies)]  # fmt: skip
        x = rng.standard_normal((row.groups, n_tok, row.cols)).astype(np.float32)
        shared = Rotor(copies)  # ours and ggml CPU read the same copies
        ours = "gguf" if x8 else "ours"  # Q2_K: GGUF rows, then the x8 layout
        sides = [Side(ours, OursPrepared(views, sub, x, opts.impl), shared, True)]
        packed = None
        if x8:
            packed = copies_of(ck.q2k_x8_repack(np.ascontiguousarray(src)), copies)
            prod = OursX8(packed, copies, rows, row.cols, x, opts.impl)
            sides.append(Side("x8", prod, Rotor(copies), True))
        weights = [GgmlWeights(g, sub, copies, rows, shared=big)]
        sides.append(Side("CPU", GgmlProducts(weights[0], x), shared, False))
        for buft in usable:
            gw = GgmlWeights(g, sub, copies, rows, buft=g.extra[buft], source=src)
            weights.append(gw)
            if not gw.supported():
                grouped = f"{row.kind.name} 3-D" if row.groups > 1 else row.kind.name
                notes.no_layout.setdefault(buft, set()).add(grouped)
                continue
            gw.fill()
            sides.append(Side(buft, GgmlProducts(gw, x), Rotor(copies), False))
        err = check(sub, case, sides, notes)
        reps = calibrate(sides[0], opts.min_time)
        times = timed_rounds(sides, opts.rounds, reps, opts.settle)
        if n_tok == 1:
            report(sub, case, sides, times, bufts, float(src.nbytes), "GB/s", err)
        else:
            macs = float(rows * row.cols * n_tok)
            report(sub, case, sides, times, bufts, macs, "GMAC/s", err)
        for s in sides:
            if isinstance(s.product, GgmlProducts):
                s.product.close()
        for gw in weights:
            gw.close()
        del big, packed, views, sides


PROBE_OK, PROBE_NO_LAYOUT, PROBE_DIFFERS = 0, 4, 5


def probe(libdir: Path, threads: int, buft: str, kind: GGMLType) -> int:
    """In a child process (`--probe`): one small product of `kind` in ggml's `buft`, one
    token and a 64-token tile, against ggml CPU; the exit status says how it went."""
    g = Ggml(libdir, threads)
    cols = 1024
    row = Row("probe", kind, cols, 64)
    rng = np.random.default_rng(0)
    w = weight_bytes(g, row, rng)
    for n_tok in (1, 64):
        x = rng.standard_normal((1, n_tok, cols)).astype(np.float32)
        cpu = GgmlProducts(GgmlWeights(g, row, 1, 64, shared=copies_of(w, 1)), x)
        other_w = GgmlWeights(g, row, 1, 64, buft=g.extra[buft], source=w)
        if not other_w.supported():
            return PROBE_NO_LAYOUT
        other_w.fill()
        other = GgmlProducts(other_w, x)
        cpu.run(0)
        other.run(0)
        if not max_rel_err(other.output(0), cpu.output(0)) <= MAX_REL_ERR:
            return PROBE_DIFFERS
    return PROBE_OK


def probe_outcome(libdir: Path, threads: int, buft: str, kind: GGMLType) -> str | None:
    """Whether ggml's `buft` can be benched for `kind` (None), or why not: a product in an
    extra buffer type can die on a machine whose CPU flags promise more than it runs
    (AMX tiles in a VM without them), so it is tried in a child process first."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    cmd = [sys.executable, "-m", "bench.ggml_kernels_bench", "--ggml-lib", str(libdir),
           "--threads", str(threads), "--probe", f"{buft}:{kind.name}"]  # fmt: skip
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        return f"a small {kind.name} product in ggml's {buft} did not finish in 300 s"
    rc = done.returncode
    if rc == PROBE_OK:
        return None
    if rc == PROBE_NO_LAYOUT:
        return ""  # no layout for the type: the table says so, no note of its own
    if rc == PROBE_DIFFERS:
        return f"a small {kind.name} product in ggml's {buft} differs from ggml CPU's"
    if rc < 0:
        return (f"a small {kind.name} product in ggml's {buft} died with "
                f"{signal.Signals(-rc).name} on this machine")  # fmt: skip
    return f"the {buft} {kind.name} probe failed: {done.stderr.decode(errors='replace')[-300:]}"


def extra_rows(names: Sequence[str], shapes: str, notes: list[str]) -> list[Row]:
    """Rows for --types: each named type on the routed experts' shapes (or all rows')."""
    out = []
    bases = [r for r in MIX if shapes == "all" or r.name in EXPERT_ROWS]
    for name in names:
        kind = GGMLType[name]
        fmt = FORMATS_BY_TYPE.get(kind)
        if fmt is None or fmt.cpu is None:
            notes.append(f"{name}: skipped, our side lacks it (no CPU kernels in QUANT_FORMATS)")
            continue
        for base in bases:
            if not _native_cpu.lib.ds4_cpu_row_bytes(int(kind), base.cols):
                notes.append(f"{name} {base.shape}: skipped, our native kernels do not take it "
                             "(ds4_cpu_row_bytes is 0)")  # fmt: skip
                continue
            out.append(Row(base.name, kind, base.cols, base.rows, base.groups))
    return out


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2, help="threads of both sides (default 2)")
    ap.add_argument("--rounds", type=int, default=7, help="alternating rounds (default 7)")
    ap.add_argument("--prefill", default="64,512", help="prefill tile tokens (default 64,512)")
    ap.add_argument("--cases", default="stream,cache,prefill",
                    help="which of stream, cache, prefill (default all)")  # fmt: skip
    ap.add_argument("--head", action="store_true",
                    help="also the output head, Q8_0 4096->129280 (563 MB a copy)")  # fmt: skip
    ap.add_argument("--types", default="",
                    help="extra weight types by GGML name (Q4_K,MXFP4,...), benched on the "
                         "routed experts' shapes (see --type-shapes)")  # fmt: skip
    ap.add_argument("--type-shapes", choices=("experts", "all"), default="experts",
                    help="the shapes of the --types rows: the routed experts' (default) or "
                         "every row's")  # fmt: skip
    ap.add_argument("--rows", default="", help="only rows whose name contains one of these")
    ap.add_argument("--bufts", default=None,
                    help="ggml's extra buffer types to bench next to CPU (default: all the "
                         "CPU device lists, e.g. CPU_REPACK,AMX; '' for none)")  # fmt: skip
    ap.add_argument("--impl", choices=sorted(ck.IMPLS), default="auto",
                    help="our kernel set (default auto)")  # fmt: skip
    ap.add_argument(
        "--ggml-lib",
        type=Path,
        default=None,
        help="directory of libggml*.so (default $DS4_PEER_CACHE/llama.cpp-build/bin)",
    )
    ap.add_argument(
        "--stream-mib",
        type=int,
        default=0,
        help="MiB of copies per streamed weight (default max(768, 2 x LLC))",
    )
    ap.add_argument("--min-time", type=float, default=0.04,
                    help="seconds each side runs per round (default 0.04)")  # fmt: skip
    ap.add_argument("--probe", default=None, help=argparse.SUPPRESS)  # BUFT:TYPE, in a child
    ap.add_argument("--settle-ms", type=float, default=30.0,
                    help="pause before each side's round (default 30 ms)")  # fmt: skip
    args = ap.parse_args(argv)
    libdir = args.ggml_lib or default_ggml_lib()
    if args.probe:
        buft, _, kind = args.probe.partition(":")
        return probe(libdir, args.threads, buft, GGMLType[kind])
    if not 1 <= args.threads <= 256 or not 1 <= args.rounds <= 1000:
        ap.error("--threads 1..256, --rounds 1..1000")
    if args.stream_mib < 0 or args.min_time <= 0 or args.settle_ms < 0:
        ap.error("--stream-mib >= 0, --min-time > 0, --settle-ms >= 0")
    cases = frozenset(_csv(args.cases))
    if not cases or not cases <= {"stream", "cache", "prefill"}:
        ap.error(f"--cases {args.cases!r}: choose from stream, cache, prefill")
    try:
        prefill = tuple(int(n) for n in _csv(args.prefill))
    except ValueError:
        ap.error(f"--prefill {args.prefill!r}: comma-separated token counts")
    if any(n < 2 for n in prefill):
        ap.error("--prefill: a tile has at least 2 tokens")
    types = [t.upper() for t in _csv(args.types)]
    bad = [t for t in types if t not in GGMLType.__members__]
    if bad:
        ap.error(f"--types: unknown GGML type {', '.join(bad)}")
    if args.impl not in ck.available_impls():
        ap.error(f"--impl {args.impl}: not on this CPU (have {', '.join(ck.available_impls())})")
    llc = last_level_cache()
    stream = args.stream_mib << 20 or max(MIN_STREAM_BYTES, 2 * llc)

    notes = Notes()
    rows = [*MIX, *([HEAD] if args.head else [])]
    rows += extra_rows(types, args.type_shapes, notes.skipped)
    if args.rows:
        rows = [r for r in rows if any(part in r.name for part in _csv(args.rows))]
    ck.set_threads(args.threads)
    g = Ggml(libdir, args.threads)
    extra = list(g.extra) if args.bufts is None else _csv(args.bufts)
    unknown = [b for b in extra if b not in g.extra]
    if unknown:
        ap.error(f"--bufts: ggml's CPU device has no {', '.join(unknown)} "
                 f"(it has {', '.join(g.extra) or 'none'})")  # fmt: skip
    bufts = ["CPU", *extra]
    runnable = []
    for r in rows:
        ours_bytes = int(_native_cpu.lib.ds4_cpu_row_bytes(int(r.kind), r.cols))
        name = g.type_name(int(r.kind))
        if name.upper() != r.kind.name or g.row_size(int(r.kind), r.cols) != ours_bytes:
            notes.skipped.append(f"{r.kind.name} {r.shape}: skipped, ggml's type {int(r.kind)} "
                                 f"is {name} with other row bytes")  # fmt: skip
            continue
        runnable.append(r)
    impl = ck.best_impl() if args.impl == "auto" else args.impl
    print(f"ours: {impl} kernels, {args.threads} threads; ggml ({libdir}): {g.features()}, "
          f"{args.threads} threads, buffer types {', '.join(bufts)}")  # fmt: skip
    print(f"stream: copies of each weight filling {stream >> 20} MiB (last-level cache "
          f"{llc >> 20} MiB); cache: about {HOT_BYTES >> 10} KiB of rows; {args.rounds} "
          f"rounds; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(
        "rates of the median round (GB/s of GGUF weight bytes; GMAC/s for prefill tiles); "
        "o/X: median per-round speed ratio ours/ggml X (>1: ours faster)"
    )
    print(header(bufts), flush=True)
    opts = Options(args.threads, args.rounds, prefill, cases, args.impl, stream,
                   args.min_time, args.settle_ms / 1e3)  # fmt: skip
    outcomes: dict[tuple[str, GGMLType], str | None] = {}
    for r in runnable:
        usable = []
        for b in extra:
            if (b, r.kind) not in outcomes:
                outcomes[b, r.kind] = probe_outcome(libdir, args.threads, b, r.kind)
                if outcomes[b, r.kind]:
                    notes.skipped.append(f"{short(b)} '-' for {r.kind.name}: "
                                         f"{outcomes[b, r.kind]}")  # fmt: skip
            if outcomes[b, r.kind] is None:
                usable.append(b)
            elif outcomes[b, r.kind] == "":
                notes.no_layout.setdefault(b, set()).add(r.kind.name)
        bench_row(g, r, opts, bufts, usable, notes)
    for line in notes.lines():
        print(f"note: {line}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    g.fn["ggml_backend_free"](g.backend)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
