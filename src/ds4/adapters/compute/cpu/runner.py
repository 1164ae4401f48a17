"""CpuRunner: the reference engine's sessions and per-token state, evaluated by the
native forward (ds4._native_cpu: one call for all layers, one for the head) over the
mmapped GGUF blocks."""

from __future__ import annotations

import os

from ds4.adapters.compute import cpu_kernels
from ds4.adapters.compute.cpu.native_forward import NativeForward
from ds4.adapters.compute.cpu.native_weights import NativeWeightStore
from ds4.adapters.compute.reference.runner import ReferenceRunner, load_model
from ds4.adapters.quant.native_dequant import NativeDequantizer
from ds4.domain.engine_math.numerics import numerics_named
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import ModelRunner
from ds4.ports.model_file import ModelFile


class CpuRunner(ReferenceRunner):
    """A ReferenceRunner whose forward pass is NativeForward (sessions, state and payloads
    are the reference engine's, so snapshots move freely between the two backends)."""


def cpu_runner(
    model: ModelFile,
    hparams: DeepSeekV4HParams,
    *,
    numerics: str = "ds4",
    threads: int | None = None,
    impl: str = "auto",
) -> ModelRunner:
    """The native CPU backend over an already opened and validated model file.

    numerics: "ds4" (default) simulates the engine's rounding points, "exact" does the same
    on the scalar kernels (model.md's strict arithmetic, bit for bit), "fp32" simulates
    none (HF-comparable; quantized weights still take the integer dots). All three run
    one native call for all layers per chunk and one for the head.
    threads: the kernel pool size (default: every core); impl: "auto" (best SIMD this
    CPU has) or "scalar" (the nominal formulas).
    """
    chosen = numerics_named(numerics)
    if impl not in cpu_kernels.available_impls():
        have = ", ".join(cpu_kernels.available_impls())
        raise Ds4Error(f"CPU kernel set {impl!r} is not available (have: {have})")
    if chosen.name == "exact":
        impl = "scalar"
    n_threads = threads if threads is not None else os.cpu_count() or 1
    cpu_kernels.set_threads(n_threads)  # Ds4Error now for a bad count, not at first use
    deq = NativeDequantizer()
    store = NativeWeightStore(model, deq, chosen, threads=n_threads, impl=impl)
    native = NativeForward(hparams, model, store, chosen, cpu_kernels.IMPLS[impl])
    return CpuRunner(model, hparams, chosen, deq, native)


def open_cpu_runner(
    path: str, *, numerics: str = "ds4", threads: int | None = None, impl: str = "auto"
) -> ModelRunner:
    """Open and validate a main-model GGUF for the native CPU backend (see cpu_runner)."""
    numerics_named(numerics)  # a bad name fails before the file is opened
    model, hparams = load_model(path)
    return cpu_runner(model, hparams, numerics=numerics, threads=threads, impl=impl)
