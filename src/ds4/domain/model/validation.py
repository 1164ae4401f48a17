"""Validate a GGUF's metadata, tensor directory and index tensors against the DeepSeek
V4 catalog.

Reports every problem at once (bad metadata, missing tensor, wrong shape, wrong
type, unexpected tensor, an out-of-range expert id), never just the first one.
`validate_model_file` is the one check both `ds4 gguf inspect` and the engine loaders
run, so that inspect never calls valid a file an engine refuses
(docs/adr/0004-gguf-validation.md). The types each tensor role accepts are the roles
column of QUANT_FORMATS (ds4.domain.gguf.quant_formats).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType, type_name
from ds4.domain.gguf.records import MetaValue, TensorInfo
from ds4.domain.model.catalog import TensorSpec, model_tensors, mtp_tensors
from ds4.domain.model.hparams import DeepSeekV4HParams, Problem, read_hparams
from ds4.domain.model.nextn import has_trunk, nextn_as_mtp, nextn_layer
from ds4.domain.model.presets import PRESETS, matching_preset, preset_differences
from ds4.domain.model.shards import infer_shard, is_shard, part_of, stray_tensors
from ds4.domain.tokenizer import REQUIRED_SPECIAL_TOKENS, check_tokenizer_tables
from ds4.ports.model_file import ModelFile

__all__ = [
    "REQUIRED_SPECIAL_TOKENS",
    "ValidationReport",
    "mtp_as_model_error",
    "validate",
    "validate_model_file",
]

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


def mtp_as_model_error(path: str) -> str:
    """The refusal of an MTP-only file where the main model is expected (`-m`): its
    metadata has no tokenizer and no trunk, so any later error would be misleading."""
    return (
        f"{path} is an MTP draft file (mtp.* tensors only), not a main model: pass it "
        f"as --mtp {path} next to the main model's -m"
    )


class ListedTensor(Protocol):
    """What a catalog says of one tensor (the model's TensorSpec, the vision encoder's
    VisionTensorSpec)."""

    @property
    def name(self) -> str: ...
    @property
    def dims(self) -> tuple[int, ...]: ...
    @property
    def allowed(self) -> frozenset[GGMLType]: ...
    @property
    def optional(self) -> bool: ...


def listed_tensor_problems(
    specs: Sequence[ListedTensor], tensors: Mapping[str, TensorInfo]
) -> list[Problem]:
    """Each catalog tensor present (unless optional), with its dims and an allowed type."""
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
    return out


def check_tensors(specs: list[TensorSpec], tensors: Mapping[str, TensorInfo]) -> list[Problem]:
    out = listed_tensor_problems(specs, tensors)
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
    tensors, problems = _nextn_directory(metadata, tensors)
    kind = file_kind(tensors)
    hp, hp_problems = read_hparams(metadata)
    problems += hp_problems
    preset = None
    if hp is not None:
        specs = model_tensors(hp) if kind == "model" else mtp_tensors(hp)
        if kind == "model" and (is_shard(metadata) or infer_shard(tensors, hp.n_layer)):
            specs, tensors, shard_problems = _shard_part(metadata, hp, specs, tensors)
            problems += shard_problems
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


def _shard_part(
    metadata: Mapping[str, MetaValue],
    hp: DeepSeekV4HParams,
    specs: list[TensorSpec],
    tensors: Mapping[str, TensorInfo],
) -> tuple[list[TensorSpec], Mapping[str, TensorInfo], list[Problem]]:
    """A layer-shard file (domain/model/shards.py) is checked against its part of the
    catalog: its range's layers, the embedding and head where it declares them, and no
    tensor of another part."""
    try:
        shard = part_of(metadata, tensors, hp.n_layer)
    except Ds4Error as exc:
        return specs, tensors, [Problem("layer shard", str(exc))]
    assert shard is not None
    stray = set(stray_tensors(shard, tensors))
    problems = [
        Problem(name, f"belongs to another part of the model than this shard ({shard.label()})")
        for name in sorted(stray)
    ]
    mine = {name: info for name, info in tensors.items() if name not in stray}
    return [s for s in specs if shard.holds(s.name)], mine, problems


def _nextn_directory(
    metadata: Mapping[str, MetaValue], tensors: Mapping[str, TensorInfo]
) -> tuple[Mapping[str, TensorInfo], list[Problem]]:
    """The directory to check when a file holds llama.cpp's MTP layer (docs/llamacpp.md):
    without a trunk it is an MTP file, checked as our mtp.0.* block (its copies of the
    embedding and output are not); with a trunk it is a model, whose MTP layer is
    checked when --mtp names the file, not here."""
    layer = nextn_layer(metadata, tensors)
    if layer is None:
        return tensors, []
    if not has_trunk(tensors):
        mapped, problems = nextn_as_mtp(layer, tensors)
        return mapped, problems
    prefix = f"blk.{layer}."
    return {n: t for n, t in tensors.items() if not n.startswith(prefix)}, []


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


# --- Checks on the contents of tensors the engines use as indices, not as weights.
#
# A hash layer's `ffn_gate_tid2eid` (I32, [n_expert_used, n_vocab]) names the experts
# each token id routes to (docs/reference/model.md §3.8); an entry outside 0..n_expert-1 would index
# past the expert tensors, so the engines would fail on every request that reaches it
# (docs/adr/0004-gguf-validation.md). Checked vectorized, a bounded chunk of rows at a
# time: Flash's three tables are 3 MB each.
_CHUNK_ITEMS = 1 << 22  # entries compared at a time (a few MB of temporaries)


def tid2eid_name(layer: int) -> str:
    return f"blk.{layer}.ffn_gate_tid2eid.weight"


def check_tensor_data(
    hp: DeepSeekV4HParams, model: ModelFile, *, skip: Collection[str] = ()
) -> list[Problem]:
    """Problems in index tensors; `skip` names tensors already reported (wrong type/shape)."""
    out: list[Problem] = []
    for layer in range(hp.n_hash_layer):
        name = tid2eid_name(layer)
        if name in skip or name not in model.tensors:
            continue
        problem = _check_tid2eid(name, model.raw(name).view("<i4"), hp.n_expert)
        if problem is not None:
            out.append(problem)
    return out


def _check_tid2eid(name: str, table: npt.NDArray[Any], n_expert: int) -> Problem | None:
    """table: (n_vocab, n_expert_used) int32; the first entry outside 0..n_expert-1."""
    rows = max(1, _CHUNK_ITEMS // max(1, table.shape[-1]))
    for first in range(0, table.shape[0], rows):
        chunk = table[first : first + rows]
        bad = (chunk < 0) | (chunk >= n_expert)
        if bad.any():
            row, slot = (int(i) for i in np.argwhere(bad)[0])
            return Problem(
                name,
                f"token {first + row} routes to expert {int(chunk[row, slot])}, "
                f"outside 0..{n_expert - 1}",
            )
    return None
