"""Validate a GGUF's metadata and tensor directory against the DeepSeek V4 catalog.

Reports every problem at once (bad metadata, missing tensor, wrong shape, wrong
type, unexpected tensor), never just the first one. `validate_model_file` is the one
check both `ds4 gguf inspect` and the engine loaders run, so that inspect never calls
valid a file an engine refuses (docs/adr/0004-gguf-validation.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ds4.domain.gguf.ggml_types import type_name
from ds4.domain.gguf.records import MetaValue, TensorInfo
from ds4.domain.model.catalog import TensorSpec, model_tensors, mtp_tensors
from ds4.domain.model.hparams import DeepSeekV4HParams, read_hparams
from ds4.domain.model.presets import PRESETS, matching_preset, preset_differences
from ds4.domain.model.problems import Problem
from ds4.domain.model.tensor_data_checks import check_tensor_data
from ds4.domain.tokenizer import REQUIRED_SPECIAL_TOKENS, check_tokenizer_tables
from ds4.ports.model_file import ModelFile

__all__ = ["REQUIRED_SPECIAL_TOKENS", "ValidationReport", "validate", "validate_model_file"]

FileKind = Literal["model", "mtp"]


@dataclass(frozen=True)
class ValidationReport:
    kind: FileKind
    hparams: DeepSeekV4HParams | None
    preset: str | None  # name of the preset the shape equals, if any
    problems: tuple[Problem, ...]

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def ok(self) -> bool:
        return not self.errors


def file_kind(tensors: Mapping[str, TensorInfo]) -> FileKind:
    is_mtp = any(name.startswith("mtp.") for name in tensors) and "token_embd.weight" not in tensors
    return "mtp" if is_mtp else "model"


def check_tensors(specs: list[TensorSpec], tensors: Mapping[str, TensorInfo]) -> list[Problem]:
    out: list[Problem] = []
    for spec in specs:
        info = tensors.get(spec.name)
        if info is None:
            if not spec.optional:
                out.append(Problem(spec.name, "missing"))
            continue
        if info.dims != spec.dims:
            out.append(Problem(spec.name, f"dims {list(info.dims)}, expected {list(spec.dims)}"))
        if info.ggml_type not in spec.allowed:
            allowed = ", ".join(sorted(t.name for t in spec.allowed))
            out.append(
                Problem(spec.name, f"type {type_name(info.ggml_type)}, expected one of {allowed}")
            )
    known = {spec.name for spec in specs}
    for name in tensors:
        if name not in known:
            out.append(Problem(name, "unexpected tensor (not in the catalog)", "warning"))
    out += _check_expert_pairs(specs, tensors)
    return out


def _check_expert_pairs(
    specs: list[TensorSpec], tensors: Mapping[str, TensorInfo]
) -> list[Problem]:
    """Routed gate and up experts run as one fused kernel, so they share a type."""
    out = []
    for spec in specs:
        if not spec.name.endswith("ffn_gate_exps.weight"):
            continue
        gate = tensors.get(spec.name)
        up = tensors.get(spec.name.replace("gate_exps", "up_exps"))
        if gate and up and gate.ggml_type != up.ggml_type:
            out.append(
                Problem(
                    up.name,
                    f"type {type_name(up.ggml_type)} differs from gate experts "
                    f"({type_name(gate.ggml_type)})",
                )
            )
    return out


def validate(
    metadata: Mapping[str, MetaValue],
    tensors: Mapping[str, TensorInfo],
    *,
    require_preset: str | None = None,
    require_shape: tuple[str, DeepSeekV4HParams] | None = None,
) -> ValidationReport:
    """Check a main-model or MTP GGUF; optionally insist on a named preset's shape, or on
    a shape given as (label, hyperparameters), e.g. read from a release's config.json."""
    kind = file_kind(tensors)
    hp, problems = read_hparams(metadata)
    preset = None
    if hp is not None:
        specs = model_tensors(hp) if kind == "model" else mtp_tensors(hp)
        problems += check_tensors(specs, tensors)
        preset = matching_preset(hp)
        if require_preset is not None:
            problems += [
                Problem(f"preset {require_preset}", diff)
                for diff in preset_differences(hp, PRESETS[require_preset])
            ]
        if require_shape is not None:
            label, shape = require_shape
            problems += [Problem(label, diff) for diff in preset_differences(hp, shape)]
    if kind == "model":
        problems += check_tokenizer_tables(metadata, hp.n_vocab if hp else None)
    return ValidationReport(kind, hp, preset, tuple(problems))


def validate_model_file(
    model: ModelFile,
    *,
    require_preset: str | None = None,
    require_shape: tuple[str, DeepSeekV4HParams] | None = None,
) -> ValidationReport:
    """`validate`, plus the tensor contents the engines index with (tid2eid).

    The data checks run only on tensors the directory check passed, so they read
    exactly the bytes the catalog promises.
    """
    report = validate(
        model.metadata, model.tensors, require_preset=require_preset, require_shape=require_shape
    )
    if report.hparams is None or report.kind != "model":
        return report
    flagged = {p.subject for p in report.errors}
    data_problems = check_tensor_data(report.hparams, model, skip=flagged)
    return ValidationReport(
        report.kind, report.hparams, report.preset, report.problems + tuple(data_problems)
    )
