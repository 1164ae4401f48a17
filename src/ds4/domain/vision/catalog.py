"""The deepseek4v mmproj tensor catalog, derived from the hyperparameters, and the
check of a file's directory against it (docs/vision.md §1).

Dims are GGUF order (ne0 first). Any tensor outside the catalog is an error, not a
warning as in the main model: llama.cpp's clip loader picks up optional tensors by name
(norm biases, q/k norms, layer scales) and would compute something this engine does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ds4.domain.gguf.ggml_types import GGMLType as T
from ds4.domain.gguf.records import MetaValue, TensorInfo
from ds4.domain.model.hparams import Problem
from ds4.domain.model.validation import listed_tensor_problems
from ds4.domain.vision.hparams import VisionHParams, read_vision_hparams

VECTOR_TYPES = frozenset({T.F32})
PATCH_TYPES = frozenset({T.F32, T.F16})
MATRIX_TYPES = frozenset({T.F32, T.F16, T.BF16, T.Q8_0})

# The learned sentinel rows of the token block, in the order they follow the aligner's
# grid in the block index (ds4.domain.vision.layout).
SENTINELS = ("v.token_embd.img_start", "v.token_embd.img_end", "v.image_newline",
             "v.token_embd.img_pad")  # fmt: skip


@dataclass(frozen=True)
class VisionTensorSpec:
    name: str
    dims: tuple[int, ...]
    allowed: frozenset[T]
    optional: bool = False


def vision_tensors(hp: VisionHParams) -> list[VisionTensorSpec]:
    d, f, out, a = hp.n_embd, hp.n_ff, hp.n_embd_out, hp.aligner_dim
    p, m, v = hp.patch_size, MATRIX_TYPES, VECTOR_TYPES
    specs = [
        VisionTensorSpec("v.patch_embd.weight", (p, p, 3, d), PATCH_TYPES),
        VisionTensorSpec("v.patch_embd.bias", (d,), v, optional=True),
    ]
    for il in range(hp.n_layer):
        pre = f"v.blk.{il}."
        specs += [
            VisionTensorSpec(f"{pre}ln1.weight", (d,), v),
            VisionTensorSpec(f"{pre}attn_qkv.weight", (d, 3 * d), m),
            VisionTensorSpec(f"{pre}attn_qkv.bias", (3 * d,), v, optional=True),
            VisionTensorSpec(f"{pre}attn_out.weight", (d, d), m),
            VisionTensorSpec(f"{pre}attn_out.bias", (d,), v, optional=True),
            VisionTensorSpec(f"{pre}ln2.weight", (d,), v),
            VisionTensorSpec(f"{pre}ffn_gate.weight", (d, f), m),
            VisionTensorSpec(f"{pre}ffn_gate.bias", (f,), v, optional=True),
            VisionTensorSpec(f"{pre}ffn_up.weight", (d, f), m),
            VisionTensorSpec(f"{pre}ffn_up.bias", (f,), v, optional=True),
            VisionTensorSpec(f"{pre}ffn_down.weight", (f, d), m),
            VisionTensorSpec(f"{pre}ffn_down.bias", (d,), v, optional=True),
        ]
    specs += [
        VisionTensorSpec("v.post_ln.weight", (d,), v, optional=True),
        VisionTensorSpec("mm.1.weight", (hp.merged_dim, a), m),
        VisionTensorSpec("mm.1.bias", (a,), v),
        VisionTensorSpec("mm.2.weight", (a, out), m),
        VisionTensorSpec("mm.2.bias", (out,), v),
    ]
    specs += [VisionTensorSpec(name, (out,), v) for name in SENTINELS]
    return specs


def check_vision_tensors(
    specs: list[VisionTensorSpec], tensors: Mapping[str, TensorInfo]
) -> list[Problem]:
    out = listed_tensor_problems(specs, tensors)
    known = {spec.name for spec in specs}
    out += [
        Problem(name, "unexpected tensor (not in the deepseek4v catalog)")
        for name in tensors
        if name not in known
    ]
    return out


@dataclass(frozen=True)
class VisionReport:
    hparams: VisionHParams | None
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return self.hparams is not None and not self.problems


def validate_vision(
    metadata: Mapping[str, MetaValue], tensors: Mapping[str, TensorInfo]
) -> VisionReport:
    """Every problem with an mmproj file's keys and tensor directory, at once."""
    hp, problems = read_vision_hparams(metadata, tensors)
    if hp is not None:
        problems += check_vision_tensors(vision_tensors(hp), tensors)
    return VisionReport(hp, tuple(problems))
