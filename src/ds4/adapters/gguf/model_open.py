"""Open a GGUF and validate it as a DeepSeek V4 main model, in one step."""

from __future__ import annotations

from ds4.adapters.gguf.reader import GGUFFile
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.model.mtp_fit import mtp_mismatches
from ds4.domain.model.validation import validate_model_file
from ds4.ports.model_file import ModelFile


def load_model(path: str) -> tuple[GGUFFile, DeepSeekV4HParams]:
    """The mmapped GGUF and its validated hyperparameters (Ds4Error naming every problem).

    The same validation `ds4 gguf inspect` runs (docs/adr/0004-gguf-validation.md).
    """
    try:
        model = GGUFFile(path)
    except OSError as exc:
        raise Ds4Error(f"cannot open model {path}: {exc.strerror or exc}") from None
    report = validate_model_file(model)
    if not report.ok or report.hparams is None:
        model.close()
        problems = "; ".join(str(p) for p in report.errors) or "not a DeepSeek V4 model"
        raise Ds4Error(f"{path}: {problems}")
    return model, report.hparams


def routed_quant_bits(model: ModelFile) -> int:
    """4 if layer 0's routed gate experts are Q4_K, else 2 (the KV files' quant tag)."""
    gate = model.tensors["blk.0.ffn_gate_exps.weight"]
    return 4 if gate.ggml_type is GGMLType.Q4_K else 2


def load_mtp(path: str, main: DeepSeekV4HParams) -> tuple[GGUFFile, DeepSeekV4HParams]:
    """The mmapped MTP GGUF (`mtp.0.*`, docs/mtp.md), validated and checked against the
    main model's hyperparameters; Ds4Error naming every problem."""
    try:
        model = GGUFFile(path)
    except OSError as exc:
        raise Ds4Error(f"cannot open MTP model {path}: {exc.strerror or exc}") from None
    report = validate_model_file(model)
    problems = [str(p) for p in report.errors]
    if report.kind != "mtp":
        problems.insert(0, "not an MTP file (it has no mtp.0.* block, or holds a main model)")
    elif report.hparams is not None:
        problems += mtp_mismatches(main, report.hparams)
    if problems or report.hparams is None:
        model.close()
        raise Ds4Error(f"--mtp {path}: " + ("; ".join(problems) or "not a DeepSeek V4 MTP file"))
    return model, report.hparams
