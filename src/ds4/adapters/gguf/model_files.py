"""A model file opened for an engine: the GGUF opened and validated as a DeepSeek V4
main or MTP model in one step, and the values of its lookup tensors decoded on demand.

Every backend needs the lookup tensors as f32 whatever the file stores: small per-layer
vectors (norms, HC scale/base, sinks, biases, ape; decoded once and cached), embedding
rows of the tokens in hand, and the hash-routing table. Weight products never come
through here: each backend runs them on the raw blocks its own way.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.adapters.gguf.nextn_view import NextnMtpFile
from ds4.adapters.gguf.reader import GGUFFile
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.model.nextn import nextn_layer
from ds4.domain.model.presets import mtp_mismatches
from ds4.domain.model.shards import part_of, shard_as_model_error
from ds4.domain.model.validation import mtp_as_model_error, validate_model_file
from ds4.ports.model_file import Dequantizer, ModelFile


def load_model(path: str, *, shard_ok: bool = False) -> tuple[GGUFFile, DeepSeekV4HParams]:
    """The mmapped GGUF and its validated hyperparameters (Ds4Error naming every problem).

    The same validation `ds4 gguf inspect` runs (docs/adr/0004-gguf-validation.md).
    A layer-shard file (`ds4 gguf split`) holds only part of a model: refused unless
    `shard_ok` (the distributed backend's workers and shard set).
    """
    try:
        model = GGUFFile(path)
    except OSError as exc:
        raise Ds4Error(f"cannot open model {path}: {exc.strerror or exc}") from None
    report = validate_model_file(model)
    if report.kind == "mtp":
        model.close()
        raise Ds4Error(mtp_as_model_error(path))
    if not report.ok or report.hparams is None:
        model.close()
        problems = "; ".join(str(p) for p in report.errors) or "not a DeepSeek V4 model"
        raise Ds4Error(f"{path}: {problems}")
    if not shard_ok and part_of(model.metadata, model.tensors, report.hparams.n_layer):
        model.close()
        raise Ds4Error(shard_as_model_error(path))
    return model, report.hparams


def routed_quant_bits(model: ModelFile) -> int:
    """4 if layer 0's routed gate experts are Q4_K, else 2 (the KV files' quant tag)."""
    gate = model.tensors["blk.0.ffn_gate_exps.weight"]
    return 4 if gate.ggml_type is GGMLType.Q4_K else 2


def load_mtp(path: str, main: DeepSeekV4HParams) -> tuple[ModelFile, DeepSeekV4HParams]:
    """The mmapped MTP GGUF (`mtp.0.*`, docs/mtp.md), validated and checked against the
    main model's hyperparameters; Ds4Error naming every problem.

    A file holding llama.cpp's MTP layer (`blk.N.nextn.*`: its converter's MTP file, or
    a full model carrying the layer, which may then be the main model's own file) is
    read through NextnMtpFile as the same block (docs/llamacpp.md)."""
    try:
        file = GGUFFile(path)
    except OSError as exc:
        raise Ds4Error(f"cannot open MTP model {path}: {exc.strerror or exc}") from None
    layer = nextn_layer(file.metadata, file.tensors)
    model: ModelFile = file if layer is None else NextnMtpFile(file, layer)
    report = validate_model_file(model)
    problems = [str(p) for p in report.errors]
    if isinstance(model, NextnMtpFile):
        problems += [str(p) for p in model.problems]
    if report.kind != "mtp":
        problems.insert(0, "not an MTP file (it has no mtp.0.* block, or holds a main model)")
    elif report.hparams is not None:
        problems += mtp_mismatches(main, report.hparams)
    if problems or report.hparams is None:
        model.close()
        raise Ds4Error(f"--mtp {path}: " + ("; ".join(problems) or "not a DeepSeek V4 MTP file"))
    return model, report.hparams


# --- Values of a model file's lookup tensors, decoded from the mmapped blocks on demand.
F32 = npt.NDArray[np.float32]

_SMALL_SUFFIXES = ("_norm.weight", "_scale.weight", "_base.weight", "sinks.weight", ".bias",
                   "_ape.weight", "norm.weight")  # fmt: skip


class TensorValues:
    def __init__(self, model: ModelFile, dequantizer: Dequantizer) -> None:
        self._model = model
        self._deq = dequantizer
        self._small: dict[str, F32] = {}

    def has(self, name: str) -> bool:
        return name in self._model.tensors

    def ggml_type(self, name: str) -> GGMLType:
        return self._model.tensors[name].ggml_type

    def small(self, name: str) -> F32:
        """A small tensor (norm, scale, base, sinks, bias, ape) as f32, cached."""
        cached = self._small.get(name)
        if cached is None:
            if not name.endswith(_SMALL_SUFFIXES):
                raise ValueError(f"{name} is not a small tensor")
            info = self._model.tensors[name]
            cached = self._deq.dequantize(self._model.raw(name), info.ggml_type)
            cached = cached.reshape(info.numpy_shape).astype(np.float32)
            self._small[name] = cached
        return cached

    def rows(self, name: str, ids: npt.NDArray[np.int64]) -> F32:
        """Selected rows of a 2-D tensor as f32 (the embedding lookup)."""
        info = self._model.tensors[name]
        return self._deq.dequantize(self._model.raw(name)[ids], info.ggml_type)

    def int_rows(self, name: str, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Selected rows of an I32 table (the hash-routing tid2eid table)."""
        raw = np.ascontiguousarray(self._model.raw(name)[ids])
        return raw.view("<i4").astype(np.int64)
