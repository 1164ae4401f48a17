"""llama.cpp's MTP layout, read as our MTP block (docs/llamacpp.md, docs/mtp.md).

llama.cpp keeps DeepSeek V4's MTP block as one more layer after the trunk: with
`deepseek4.nextn_predict_layers = 1` and `block_count` = trunk + 1, layer N = trunk
holds the ordinary block tensors under `blk.N.*` and the MTP extras under
`blk.N.nextn.*`. The e/h input projections are one matrix, `nextn.eh_proj` [2d -> d],
whose first d inputs take the normalised embedding and the last d the normalised
hidden stream (the release's e_proj and h_proj side by side); the block's own norm is
`nextn.shared_head_norm` (the main `output_norm` when absent), and its HC head is the
file's `output_hc_*` (llama.cpp's converter writes the MTP's own head there in an
MTP-only file; a file with a trunk has only the main head, which llama.cpp then uses).

Its converter writes that layer to an MTP-only file (`--mtp`: the layer plus the
embedding, output norm and output matrix, no trunk); its loader also reads the layer
inside a full model. Both are read here as the `mtp.0.*` block `catalog.mtp_tensors`
describes: `nextn_as_mtp` maps the directory, and a reader splits eh_proj's rows at
the block boundary (`split_columns`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY
from ds4.domain.gguf.records import MetaValue, TensorInfo
from ds4.domain.model.hparams import ARCH, NEXTN_KEY, Problem

PREFIX = "mtp.0."
Half = Literal["e", "h"]

# our mtp.0.X <- llama.cpp's name ({blk} = "blk.N.")
_EXTRAS = {
    "enorm.weight": "{blk}nextn.enorm.weight",
    "hnorm.weight": "{blk}nextn.hnorm.weight",
    "hc_head_fn.weight": "output_hc_fn.weight",
    "hc_head_scale.weight": "output_hc_scale.weight",
    "hc_head_base.weight": "output_hc_base.weight",
}
EH_PROJ = "{blk}nextn.eh_proj.weight"
SHARED_NORM = "{blk}nextn.shared_head_norm.weight"
# The layer may carry its own embedding and output matrix; DeepSeek V4's MTP shares
# the main model's, and so does this engine: a file with either is refused, not ignored.
_UNSUPPORTED = ("{blk}nextn.embed_tokens.weight", "{blk}nextn.shared_head_head.weight")
_OWN_MATRIX = (
    "an MTP layer with its own embedding or output matrix is not supported "
    "(DeepSeek V4 shares the main model's)"
)


@dataclass(frozen=True)
class Derived:
    """mtp.0.X read as a column half of another tensor (rows keep their stride)."""

    source: str
    half: Half


def nextn_layer(metadata: Mapping[str, MetaValue], tensors: Mapping[str, TensorInfo]) -> int | None:
    """The index of the llama.cpp MTP layer, or None when the file has none."""
    entry = metadata.get(NEXTN_KEY)
    blocks = metadata.get(f"{ARCH}.block_count")
    if entry is None or blocks is None or not isinstance(entry.value, int):
        return None
    if not isinstance(blocks.value, int) or entry.value < 1 or entry.value > blocks.value:
        return None
    layer = blocks.value - entry.value
    return layer if EH_PROJ.format(blk=f"blk.{layer}.") in tensors else None


def has_trunk(tensors: Mapping[str, TensorInfo]) -> bool:
    return "blk.0.attn_norm.weight" in tensors


def nextn_sources(layer: int, tensors: Mapping[str, TensorInfo]) -> dict[str, str | Derived]:
    """mtp.0.X -> the file's tensor (or a half of eh_proj), for every tensor present."""
    blk = f"blk.{layer}."
    out: dict[str, str | Derived] = {}
    inner = f"{blk}nextn."
    for name in tensors:
        if name.startswith(blk) and not name.startswith(inner):
            out[PREFIX + name[len(blk) :]] = name
    for ours, theirs in _EXTRAS.items():
        out[PREFIX + ours] = theirs.format(blk=blk)
    shared = SHARED_NORM.format(blk=blk)
    out[PREFIX + "norm.weight"] = shared if shared in tensors else "output_norm.weight"
    eh = EH_PROJ.format(blk=blk)
    out[PREFIX + "e_proj.weight"] = Derived(eh, "e")
    out[PREFIX + "h_proj.weight"] = Derived(eh, "h")
    return {k: v for k, v in out.items() if _source_name(v) in tensors}


def _source_name(source: str | Derived) -> str:
    return source.source if isinstance(source, Derived) else source


def split_columns(info: TensorInfo, half: Half, name: str) -> TensorInfo:
    """The directory entry of one column half of a 2-D tensor (offset: its first byte)."""
    geo = BLOCK_GEOMETRY[info.ggml_type]
    cols, rows = info.dims
    half_bytes = cols // 2 // geo.elements * geo.nbytes
    offset = info.offset + (half_bytes if half == "h" else 0)
    return TensorInfo(name, (cols // 2, rows), info.ggml_type, offset, half_bytes * rows)


def nextn_as_mtp(
    layer: int, tensors: Mapping[str, TensorInfo]
) -> tuple[dict[str, TensorInfo], list[Problem]]:
    """The `mtp.0.*` directory of a file's llama.cpp MTP layer, and what is wrong with it."""
    problems: list[Problem] = []
    blk = f"blk.{layer}."
    for pattern in _UNSUPPORTED:
        name = pattern.format(blk=blk)
        if name in tensors:
            problems.append(Problem(name, _OWN_MATRIX))
    out: dict[str, TensorInfo] = {}
    for ours, source in nextn_sources(layer, tensors).items():
        if not isinstance(source, Derived):
            info = tensors[source]
            out[ours] = TensorInfo(ours, info.dims, info.ggml_type, info.offset, info.nbytes)
            continue
        info = tensors[source.source]
        geo = BLOCK_GEOMETRY.get(info.ggml_type)
        if len(info.dims) != 2 or geo is None or info.dims[0] % (2 * geo.elements):
            split = f"dims {list(info.dims)} of {info.ggml_type.name} do not split into e/h halves"
            problems.append(Problem(source.source, split))
            continue
        out[ours] = split_columns(info, source.half, ours)
    return out, problems
