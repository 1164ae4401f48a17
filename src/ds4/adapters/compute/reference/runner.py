"""ReferenceRunner (the ModelRunner port) and its factory from a GGUF path."""

from __future__ import annotations

from ds4.adapters.compute.reference.forward import ChunkForward, Forward
from ds4.adapters.compute.reference.session import ReferenceSession
from ds4.adapters.compute.reference.weights import WeightStore
from ds4.adapters.gguf.reader import GGUFFile
from ds4.adapters.quant.numpy_dequant import NumpyDequantizer
from ds4.domain.engine_math.numerics import Numerics, numerics_named
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.model.validation import validate
from ds4.ports.compute import ComputeSession, ModelRunner
from ds4.ports.dequantizer import Dequantizer
from ds4.ports.model_file import ModelFile


class ReferenceRunner:
    def __init__(
        self,
        model: ModelFile,
        hparams: DeepSeekV4HParams,
        numerics: Numerics,
        dequantizer: Dequantizer,
        forward: ChunkForward | None = None,
    ) -> None:
        self._model = model
        self._hp = hparams
        self.numerics = numerics
        self._forward: ChunkForward = forward or Forward(
            hparams, WeightStore(model, dequantizer, numerics), numerics
        )

    @property
    def hparams(self) -> DeepSeekV4HParams:
        return self._hp

    @property
    def routed_quant_bits(self) -> int:
        gate = self._model.tensors["blk.0.ffn_gate_exps.weight"]
        return 4 if gate.ggml_type is GGMLType.Q4_K else 2

    def new_session(self, ctx: int) -> ComputeSession:
        return ReferenceSession(self._forward, ctx)


def reference_runner(
    model: ModelFile,
    hparams: DeepSeekV4HParams,
    *,
    numerics: str = "ds4",
    dequantizer: Dequantizer | None = None,
) -> ModelRunner:
    """The reference backend over an already opened and validated model file."""
    chosen = numerics_named(numerics)
    if chosen.name == "exact":
        raise Ds4Error("--numerics exact runs on the native CPU backend (--backend cpu)")
    return ReferenceRunner(model, hparams, chosen, dequantizer or NumpyDequantizer())


def open_reference_runner(
    path: str, *, numerics: str = "ds4", dequantizer: Dequantizer | None = None
) -> ModelRunner:
    """Open and validate a main-model GGUF; Ds4Error naming every problem if it is unusable."""
    numerics_named(numerics)  # a bad name fails before the file is opened
    model, hparams = load_model(path)
    return reference_runner(model, hparams, numerics=numerics, dequantizer=dequantizer)


def load_model(path: str) -> tuple[GGUFFile, DeepSeekV4HParams]:
    """The mmapped GGUF and its validated hyperparameters (Ds4Error naming every problem)."""
    try:
        model = GGUFFile(path)
    except OSError as exc:
        raise Ds4Error(f"cannot open model {path}: {exc.strerror or exc}") from None
    report = validate(model.metadata, model.tensors)
    if not report.ok or report.hparams is None:
        problems = "; ".join(str(p) for p in report.errors) or "not a DeepSeek V4 model"
        raise Ds4Error(f"{path}: {problems}")
    return model, report.hparams
