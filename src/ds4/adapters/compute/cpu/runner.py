"""CpuRunner: the reference engine's structure and per-token state, with every weight
product on the native kernels (ds4._native_cpu) over the mmapped GGUF blocks."""

from __future__ import annotations

import os

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute import cpu_kernels
from ds4.adapters.compute.cpu.ffn import native_ffn
from ds4.adapters.compute.cpu.native_forward import NativeForward
from ds4.adapters.compute.cpu.native_weights import NativeWeightStore
from ds4.adapters.compute.reference.attention_layer import LayerSetup
from ds4.adapters.compute.reference.forward import Forward
from ds4.adapters.compute.reference.runner import ReferenceRunner, load_model
from ds4.adapters.quant.native_dequant import NativeDequantizer
from ds4.domain.engine_math.numerics import Numerics, numerics_named
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import ModelRunner

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


class CpuForward(Forward):
    def __init__(
        self, hp: DeepSeekV4HParams, weights: NativeWeightStore, numerics: Numerics
    ) -> None:
        super().__init__(hp, weights, numerics)
        self.native = weights

    def ffn(self, setup: LayerSetup, g: F32, tokens: I64) -> F32:
        return native_ffn(self.native, setup, g, tokens)


class CpuRunner(ReferenceRunner):
    """A ReferenceRunner whose forward pass is CpuForward (sessions, state and payloads
    are the reference engine's, so snapshots move freely between the two backends)."""


def open_cpu_runner(
    path: str, *, numerics: str = "ds4", threads: int | None = None, impl: str = "auto"
) -> ModelRunner:
    """Open and validate a main-model GGUF for the native CPU backend.

    numerics: "ds4" (default) and "exact" run one native call per layer in model.md's
    operation order; "exact" forces the scalar kernels, so every value is the strict
    reference arithmetic. "fp32" (no low-precision simulation) runs the reference
    engine's numpy structure with native weight products.
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
    model, hparams = load_model(path)
    deq = NativeDequantizer()
    store = NativeWeightStore(model, deq, chosen, threads=n_threads, impl=impl)
    if chosen.name == "fp32":
        return CpuRunner(model, hparams, chosen, deq, CpuForward(hparams, store, chosen))
    native = NativeForward(hparams, model, store, cpu_kernels.IMPLS[impl])
    return CpuRunner(model, hparams, chosen, deq, native)
