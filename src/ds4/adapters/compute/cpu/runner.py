"""CpuRunner: the ModelRunner port on the native forward (ds4._native_cpu), with
per-sequence state owned by C (CpuState), each session an EngineSession over one."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute import cpu_kernels
from ds4.adapters.compute.cpu.expert_repack import (
    RepackSummary,
    repack_down_experts,
    repack_skip_reason,
    repackable,
)
from ds4.adapters.compute.cpu.expert_streaming import ExpertStreaming
from ds4.adapters.compute.cpu.native_forward import NativeForward
from ds4.adapters.compute.cpu.sequence_state import CpuState
from ds4.adapters.gguf.model_files import TensorValues, load_model, routed_quant_bits
from ds4.adapters.gguf.reader import GGUFFile
from ds4.adapters.quant.native_codec import NativeDequantizer
from ds4.domain.engine.state_runner import StateRunner
from ds4.domain.engine_math.lowprec import Numerics, check_numerics_fit, numerics_named
from ds4.domain.errors import Ds4Error
from ds4.domain.expert_cache import ExpertCacheStats, StreamingOptions
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.steering.directions import Steering
from ds4.ports.compute import Component, SequenceState
from ds4.ports.model_file import ModelFile

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class CpuRunner(StateRunner):
    def __init__(
        self,
        model: ModelFile,
        hparams: DeepSeekV4HParams,
        numerics: Numerics,
        impl: str,
        streaming: StreamingOptions | None = None,
        log: Callable[[str], None] = _stderr,
        repack_experts: str = "off",
    ) -> None:
        super().__init__(hparams)
        self._model = model
        self.numerics = numerics
        values = TensorValues(model, NativeDequantizer())
        self.forward = NativeForward(hparams, model, values, numerics, cpu_kernels.IMPLS[impl])
        # ADR 0067: routed Q2_K down rows interleaved by 8 where the AVX-512 kernel reads them
        skip = repack_skip_reason(
            repack_experts, numerics=numerics.name, impl=impl, streaming=streaming is not None
        )
        layout = self.forward.layout
        self.repack: RepackSummary = (
            repack_down_experts(
                layout.layers,
                [f"blk.{il}.ffn_down_exps.weight" for il in layout.layer_range],
                model,
                layout.keep,
                log,
                drop_mapped=isinstance(model, GGUFFile),
            )
            if skip is None
            else RepackSummary(0, 0, skip)
        )
        # --ssd-streaming: routed experts through the budgeted cache, not the mapping
        self.streaming = (
            ExpertStreaming(model, hparams, self.forward.layout, streaming, log)
            if streaming is not None
            else None
        )
        # after the streaming lines, which callers read first; said only for a model
        # that has such tensors (not the Q8_0 demo model)
        if repackable(layout.layers, len(layout.layer_range)):
            log(self.repack.line())
        self._captured = np.zeros((hparams.n_layer, hparams.n_embd), np.float32)

    def expert_cache_stats(self) -> ExpertCacheStats | None:
        """The expert cache's counters so far; None without --ssd-streaming."""
        return self.streaming.stats() if self.streaming is not None else None

    @property
    def routed_quant_bits(self) -> int:
        return routed_quant_bits(self._model)

    # ---- Steerable (docs/steering.md) ----------------------------------------

    def steer(self, steering: Steering | None) -> None:
        if steering is None:  # zero scales still go to the kernels, which skip them
            self.forward.layout.set_steering(None, 0.0, 0.0)
        else:
            self.forward.layout.set_steering(steering.directions, steering.attn, steering.ffn)

    def capture(self, component: Component | None) -> None:
        self._captured = np.zeros((self._hp.n_layer, self._hp.n_embd), np.float32)
        rows = self._captured if component is not None else None
        self.forward.layout.set_capture(rows, component == "attn_out")

    def captured(self) -> F32:
        return self._captured.copy()

    def new_state(self, ctx: int) -> SequenceState:
        return CpuState(self.forward, ctx)

    @property
    def batches_in_one_pass(self) -> bool:
        return True  # ds4_fw_seqs_forward: one native pass over every session's rows

    def forward_states(self, states: Sequence[SequenceState], ids: Sequence[I64]) -> list[F32]:
        seqs = []
        for state in states:
            if not isinstance(state, CpuState):
                raise Ds4Error("a cpu batch takes cpu sequence states only")
            seqs.append(state.seq)
        return self.forward.run_many(seqs, list(ids))


def cpu_runner(
    model: ModelFile,
    hparams: DeepSeekV4HParams,
    *,
    numerics: str = "ds4",
    threads: int | None = None,
    impl: str = "auto",
    streaming: StreamingOptions | None = None,
    log: Callable[[str], None] = _stderr,
    repack_experts: str = "auto",
) -> CpuRunner:
    """The native CPU backend over an already opened and validated model file.

    numerics: "ds4" (default) simulates the engine's rounding points, "exact" does the same
    on the scalar kernels (docs/reference/model.md §4.5's strict arithmetic, bit for bit), "fp32"
    simulates none (HF-comparable; quantized weights still take the integer dots). All three run
    one native call for all layers per chunk and one for the head.
    threads: the kernel pool size (default: every core); impl: "auto" (best SIMD this
    CPU has) or "scalar" (the nominal formulas). streaming: serve routed experts from
    the budgeted SSD-streaming cache (docs/ssd-streaming.md); log gets its start-up lines.
    repack_experts: "auto" repacks the routed Q2_K down projections for the AVX-512
    kernel where it applies (docs/adr/0067-q2k-row-interleaved-repack.md), "off" keeps
    the GGUF layout.
    """
    chosen = numerics_named(numerics)
    if impl not in cpu_kernels.available_impls():
        have = ", ".join(cpu_kernels.available_impls())
        raise Ds4Error(f"CPU kernel set {impl!r} is not available (have: {have})")
    if chosen.name == "exact":
        impl = "scalar"
    n_threads = threads if threads is not None else os.cpu_count() or 1
    cpu_kernels.set_threads(n_threads)  # Ds4Error now for a bad count, not at first use
    check_numerics_fit(chosen, hparams)
    return CpuRunner(model, hparams, chosen, impl, streaming, log, repack_experts)


def open_cpu_runner(
    path: str,
    *,
    numerics: str = "ds4",
    threads: int | None = None,
    impl: str = "auto",
    streaming: StreamingOptions | None = None,
    repack_experts: str = "auto",
) -> CpuRunner:
    """Open and validate a main-model GGUF for the native CPU backend (see cpu_runner)."""
    numerics_named(numerics)  # a bad name fails before the file is opened
    model, hparams = load_model(path)
    return cpu_runner(
        model,
        hparams,
        numerics=numerics,
        threads=threads,
        impl=impl,
        streaming=streaming,
        repack_experts=repack_experts,
    )
