"""ReferenceRunner (the ModelRunner port) and its factories."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.forward import Forward, WeightStore
from ds4.adapters.compute.reference.state import ReferenceState
from ds4.adapters.gguf.model_files import load_model, routed_quant_bits
from ds4.adapters.quant.numpy_codec import NumpyDequantizer
from ds4.domain.engine.state_runner import StateRunner
from ds4.domain.engine_math.lowprec import Numerics, check_numerics_fit, numerics_named
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.steering.directions import Steering
from ds4.ports.compute import Component, ModelRunner, SequenceState
from ds4.ports.model_file import Dequantizer, ModelFile

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


class ReferenceRunner(StateRunner):
    def __init__(
        self,
        model: ModelFile,
        hparams: DeepSeekV4HParams,
        numerics: Numerics,
        dequantizer: Dequantizer,
        *,
        weights: WeightStore | None = None,
    ) -> None:
        """weights: where the weight products run (default: numpy on the host; the vulkan
        backend passes its device-resident store)."""
        super().__init__(hparams)
        self._model = model
        self.numerics = numerics
        store = weights or WeightStore(model, dequantizer, numerics)
        self.forward = Forward(hparams, store, numerics)

    @property
    def routed_quant_bits(self) -> int:
        return routed_quant_bits(self._model)

    # ---- Steerable (docs/steering.md) ----------------------------------------

    def steer(self, steering: Steering | None) -> None:
        self.forward.steering = steering  # zero scales are skipped per sublayer

    def capture(self, component: Component | None) -> None:
        self.forward.capture_component = component
        self.forward.captured = np.zeros((self._hp.n_layer, self._hp.n_embd), np.float32)

    def captured(self) -> F32:
        return self.forward.captured.copy()

    def new_state(self, ctx: int) -> SequenceState:
        return ReferenceState(self.forward, ctx)

    @property
    def batches_in_one_pass(self) -> bool:
        return False  # the oracle forwards one state after another

    def forward_states(self, states: Sequence[SequenceState], ids: Sequence[I64]) -> list[F32]:
        """One state after another (the oracle does not batch); a failure puts back the
        states already advanced, so a failed batch changes none."""
        done: list[tuple[SequenceState, int]] = []
        out = []
        try:
            for state, chunk in zip(states, ids, strict=True):
                start = state.length
                out.append(state.forward(chunk, False))
                done.append((state, start))
        except BaseException:
            for state, start in done:
                state.truncate(start)
            raise
        return out


def reference_runner(
    model: ModelFile,
    hparams: DeepSeekV4HParams,
    *,
    numerics: str = "ds4",
    dequantizer: Dequantizer | None = None,
) -> ModelRunner:
    """The reference backend over an already opened and validated model file."""
    chosen = reference_numerics(numerics, hparams)
    return ReferenceRunner(model, hparams, chosen, dequantizer or NumpyDequantizer())


def reference_numerics(numerics: str, hparams: DeepSeekV4HParams) -> Numerics:
    """The numerics the reference forward runs (and backends built on it): not `exact`,
    which only the native CPU backend implements, and one the model's shape allows."""
    chosen = numerics_named(numerics)
    if chosen.name == "exact":
        raise Ds4Error("--numerics exact runs on the native CPU backend (--backend cpu)")
    check_numerics_fit(chosen, hparams)
    return chosen


def open_reference_runner(
    path: str, *, numerics: str = "ds4", dequantizer: Dequantizer | None = None
) -> ModelRunner:
    """Open and validate a main-model GGUF; Ds4Error naming every problem if it is unusable."""
    numerics_named(numerics)  # a bad name fails before the file is opened
    model, hparams = load_model(path)
    return reference_runner(model, hparams, numerics=numerics, dequantizer=dequantizer)
