"""The routed experts' Q2_K down projections repacked once at load into rows interleaved
by 8 (docs/adr/0067-q2k-row-interleaved-repack.md), for the AVX-512 group kernel.

Each tensor is copied into its own 64-byte aligned anonymous buffer, tensor by tensor
(the peak is one tensor over the mapping), the layer's `down_exps` is pointed at the
copy with `x8 = 1`, and the mapped original's pages are dropped from this process
(MADV_DONTNEED: nothing reads them again; a stray read would fault them back in from
the file, never wrong bytes). The copy has the original's size, so resident memory is
the same as with the mapping fully resident, but it is anonymous memory.

Applies only where the model is fully resident (not with --ssd-streaming: the expert
cache reads GGUF bytes from the file), with `ds4` numerics on the `avx512` kernel set
(`exact` runs the scalar kernels, which read GGUF rows only).
"""

from __future__ import annotations

import ctypes
import mmap
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.adapters.compute import cpu_kernels
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.ports.model_file import ModelFile

_ffi = _native_cpu.ffi
_lib = _native_cpu.lib

REPACK_CHOICES = ("auto", "off")
_ALIGN = 64
_MADV_DONTNEED = 4  # <sys/mman.h> on Linux
_PROGRESS_BYTES = 64 * 2**20


@dataclass(frozen=True)
class RepackSummary:
    """What the load did: tensors and bytes repacked, or why nothing was."""

    tensors: int
    nbytes: int
    skipped: str | None = None
    seconds: float = 0.0  # the repack's share of the load time

    def line(self) -> str:
        if self.skipped is not None:
            return f"repack-experts: off ({self.skipped})"
        if self.tensors == 0:
            return "repack-experts: no routed Q2_K down tensors to repack"
        size = (
            f"{self.nbytes / 2**30:.2f} GiB"
            if self.nbytes >= 2**30
            else f"{self.nbytes / 2**20:.1f} MiB"
        )
        return (
            f"repack-experts: {self.tensors} routed Q2_K down tensors repacked in "
            f"{self.seconds:.1f} s ({size} anonymous memory, mapped originals dropped)"
        )


def repack_skip_reason(choice: str, *, numerics: str, impl: str, streaming: bool) -> str | None:
    """Why the repack does not apply (None: it does)."""
    if choice not in REPACK_CHOICES:
        raise Ds4Error(f"--repack-experts {choice!r}: use one of {', '.join(REPACK_CHOICES)}")
    if choice == "off":
        return "--repack-experts off"
    if streaming:
        return "--ssd-streaming reads GGUF bytes from the file"
    if numerics != "ds4":
        return f"--numerics {numerics} (only ds4 numerics use the repacked kernel)"
    resolved = cpu_kernels.best_impl() if impl == "auto" else impl
    if resolved != "avx512":
        return f"kernel set {resolved} (the repacked kernel is avx512 only)"
    return None


def _aligned(nbytes: int) -> npt.NDArray[np.uint8]:
    buf = np.empty(nbytes + _ALIGN, dtype=np.uint8)
    start = (-buf.ctypes.data) % _ALIGN
    return buf[start : start + nbytes]


def _drop_pages(raw: npt.NDArray[np.uint8]) -> None:
    """MADV_DONTNEED on the whole pages inside raw's range (best effort: a failure only
    leaves the pages resident)."""
    page = mmap.PAGESIZE
    lo = -(-raw.ctypes.data // page) * page
    hi = (raw.ctypes.data + raw.nbytes) // page * page
    if hi <= lo:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), _MADV_DONTNEED)


def repackable(layers: Any, n: int) -> list[int]:
    """Indices of layers[:n] whose routed down tensor the repack would take."""
    q8k = {int(t) for t in cpu_kernels.Q8K_TYPES}
    out = []
    for i in range(n):
        c = layers[i]
        d = c.down_exps
        if d.data == _ffi.NULL or d.type != int(GGMLType.Q2_K) or d.expert_stride == 0:
            continue
        if c.gate_exps.type in q8k and c.up_exps.type in q8k:
            out.append(i)
    return out


def repack_down_experts(
    layers: Any,
    names: list[str],
    model: ModelFile,
    keep: list[Any],
    log: Callable[[str], None],
    *,
    drop_mapped: bool,
) -> RepackSummary:
    """Repack every layer's routed Q2_K down tensor (layers[i] is the ds4_fw_layer of
    tensor names[i]) whose gate and up take the fused Q8_K path; copies go in `keep`.
    drop_mapped: the originals are a file mapping whose pages may be dropped (never for
    tensors in anonymous memory, which MADV_DONTNEED would zero)."""
    todo = [(i, names[i]) for i in repackable(layers, len(names))]
    total = 0
    t0 = time.perf_counter()
    for n_done, (i, name) in enumerate(todo, 1):
        d = layers[i].down_exps
        raw = model.raw(name)
        n_expert, rows, cols = raw.shape[0], int(d.rows), int(d.cols)
        per = int(_lib.ds4_cpu_q2k_x8_bytes(rows, cols))
        if per == 0 or per != rows * raw.shape[-1]:
            raise Ds4Error(f"{name}: cannot repack a {rows}x{cols} Q2_K matrix")
        out = _aligned(per * n_expert)
        src = _ffi.cast("const uint8_t *", raw.ctypes.data)
        dst = _ffi.cast("uint8_t *", out.ctypes.data)
        for e in range(n_expert):
            rc = _lib.ds4_cpu_q2k_x8_repack(
                src + e * raw.strides[0], raw.strides[1], rows, cols, dst + e * per
            )
            if rc != 0:
                raise Ds4Error(f"{name}: repack failed (native error {rc})")
        keep.append(out)
        d.data = _ffi.cast("const uint8_t *", out.ctypes.data)
        d.expert_stride, d.row_stride, d.x8 = per, raw.shape[-1], 1
        if drop_mapped:
            _drop_pages(raw)
        total += out.nbytes
        if len(todo) > 1 and out.nbytes >= _PROGRESS_BYTES:  # a real model: minutes
            log(f"repack-experts: {n_done}/{len(todo)} tensors ({total / 2**20:.0f} MiB)")
    return RepackSummary(len(todo), total, seconds=time.perf_counter() - t0)
