"""Reading a DeepSeek checkpoint for conversion: checkpoint tensor names to ds4 GGUF
names, the release formats decoded (FP8 E4M3 tiles, packed FP4 E2M1), and which stored
tensors feed each GGUF tensor, read in chunks (docs/reference/formats.md §3.5).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ds4.domain.convert.plan import Chunk, PlannedTensor
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf import mxfp4
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.ports.model_file import Checkpoint, CheckpointTensor

# --- fp formats ---
# Decoding DeepSeek's release formats: FP8 E4M3 with E8M0 128x128 tile scales, packed FP4
# E2M1 with E8M0 per-32 scales (docs/reference/formats.md §3.5,
# docs/reference/model.md §2.5).

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

FP8_TILE = 128
FP4_GROUP = 32


def _e4m3_table() -> F32:
    codes = np.arange(256)
    e = (codes >> 3) & 15
    m = (codes & 7).astype(np.float64)
    mag = np.where(e == 0, m * 2.0**-9, (1.0 + m / 8.0) * 2.0 ** (e - 7.0))
    mag[(codes & 127) == 127] = 0.0  # the NaN code decodes to 0, as the release tools do
    return np.where(codes & 128, -mag, mag).astype(np.float32)


E4M3_VALUES: F32 = _e4m3_table()
E2M1_VALUES: F32 = np.array(
    [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32
)


def e8m0_scales(codes: U8) -> F32:
    """E8M0 byte e -> 2^(e-127); e = 255 (NaN in the format) is rejected."""
    if np.any(codes == 255):
        raise Ds4Error("E8M0 scale byte 255 (NaN) in a block scale")
    return np.ldexp(np.float32(1.0), codes.astype(np.int32) - 127).astype(np.float32)


def decode_fp8_tiles(weight: U8, scale: U8, name: str) -> F32:
    """(out, in) E4M3 codes times one E8M0 scale per 128x128 tile."""
    rows, cols = weight.shape
    want = (-(-rows // FP8_TILE), -(-cols // FP8_TILE))
    if scale.shape != want:
        raise Ds4Error(f"{name}: FP8 scale has shape {scale.shape}, expected {want}")
    tiles = e8m0_scales(scale)
    expanded = np.repeat(np.repeat(tiles, FP8_TILE, axis=0)[:rows], FP8_TILE, axis=1)[:, :cols]
    out: F32 = E4M3_VALUES[weight] * expanded
    return out


def decode_fp4_groups(packed: U8, scale: U8, name: str) -> F32:
    """(out, in/2) bytes, two E2M1 codes each (low nibble first), one E8M0 scale per 32."""
    rows, half = packed.shape
    cols = 2 * half
    if cols % FP4_GROUP or scale.shape != (rows, cols // FP4_GROUP):
        raise Ds4Error(
            f"{name}: FP4 scale has shape {scale.shape}, expected {(rows, cols // FP4_GROUP)}"
        )
    codes = np.empty((rows, cols), dtype=np.uint8)
    codes[:, 0::2] = packed & 15
    codes[:, 1::2] = packed >> 4
    values = E2M1_VALUES[codes].reshape(rows, cols // FP4_GROUP, FP4_GROUP)
    out: F32 = (values * e8m0_scales(scale)[:, :, None]).reshape(rows, cols)
    return out


def fp4_as_mxfp4(packed: U8, scale: U8, name: str) -> U8:
    """The same FP4 groups as MXFP4 blocks, bit for bit (docs/reference/formats.md §4.8):
    each group of 32 keeps its E8M0 byte (MXFP4's doubled codes under a halved scale
    give the same values) and its codes, reordered from the release's pairs (value 2i in
    the low nibble of byte i) to MXFP4's halves (value j low, j + 16 high). Values equal
    decode_fp4_groups' exactly; a -0 code decodes to +0."""
    rows, half = packed.shape
    cols = 2 * half
    if cols % FP4_GROUP or scale.shape != (rows, cols // FP4_GROUP):
        raise Ds4Error(
            f"{name}: FP4 scale has shape {scale.shape}, expected {(rows, cols // FP4_GROUP)}"
        )
    if np.any(scale == 255):
        raise Ds4Error(f"{name}: E8M0 scale byte 255 (NaN) in a block scale")
    codes = np.empty((rows, cols), dtype=np.uint8)
    codes[:, 0::2] = packed & 15
    codes[:, 1::2] = packed >> 4
    qs = mxfp4.pack_codes(codes.reshape(-1, FP4_GROUP))
    blocks = np.concatenate([scale.reshape(-1, 1), qs], axis=1)
    return blocks.reshape(rows, cols // FP4_GROUP * mxfp4.BLOCK_BYTES)


# --- source decode ---
# Turn one stored checkpoint tensor (any release dtype) into float32 or int32 rows.

I32 = npt.NDArray[np.int32]

SCALED_DTYPES = frozenset({"F8_E4M3", "I8"})  # need their sibling `.scale` tensor


def decode_rows(
    name: str,
    raw: npt.NDArray[np.generic],
    dtype: str,
    scale: npt.NDArray[np.generic] | None,
    rows: slice,
) -> F32 | I32:
    """Rows `rows` (a step-1 slice of the leading axis) of a stored tensor, decoded.

    FP8 bands must start on a 128-row tile boundary so each tile's scale applies whole.
    """
    part = raw[rows] if raw.ndim > 1 else raw
    if dtype in ("F32", "F16", "F64"):
        return np.ascontiguousarray(part, dtype=np.float32)
    if dtype == "BF16":
        bits = np.ascontiguousarray(part).astype(np.uint32) << 16
        return bits.view(np.float32)
    if dtype in ("I64", "I32"):
        values = np.asarray(part)
        info = np.iinfo(np.int32)
        if values.size and (values.min() < info.min or values.max() > info.max):
            raise Ds4Error(f"{name}: integer values do not fit in int32")
        return values.astype(np.int32)
    if dtype in SCALED_DTYPES:
        if scale is None:
            raise Ds4Error(f"{name}: {dtype} weight without its .scale tensor")
        if raw.ndim != 2:
            raise Ds4Error(f"{name}: {dtype} weight must be 2-D, got shape {raw.shape}")
        start, stop = rows.start or 0, rows.stop if rows.stop is not None else raw.shape[0]
        codes = np.ascontiguousarray(part).view(np.uint8)
        scale_u8 = np.asarray(scale).view(np.uint8)
        if dtype == "F8_E4M3":
            if start % FP8_TILE:
                raise Ds4Error(f"{name}: FP8 rows must be decoded in whole 128-row tiles")
            tile_rows = slice(start // FP8_TILE, -(-stop // FP8_TILE))
            return decode_fp8_tiles(codes, scale_u8[tile_rows], name)
        return decode_fp4_groups(codes, scale_u8[start:stop], name)
    raise Ds4Error(f"{name}: stored dtype {dtype} cannot be converted")


def logical_shape(shape: tuple[int, ...], dtype: str) -> tuple[int, ...]:
    """The value shape of a stored tensor (packed FP4 holds two values per byte)."""
    if dtype == "I8" and len(shape) == 2:
        return (shape[0], shape[1] * 2)
    return shape


# --- tensor names ---
# Checkpoint tensor names -> ds4 GGUF names (docs/reference/formats.md §3.5,
# docs/oracle/hf_deepseek_v4.md §2).
#
# Every input name is first brought to the release's ("hub") spelling; `save_pretrained`
# differs from it only in a handful of top-level names and one per-layer quirk. Routed
# experts are stored one matrix per expert and stacked on a leading axis in the GGUF.

# save_pretrained spellings that are not the hub's.
_HF_TOP_LEVEL = {
    "model.embed_tokens.weight": "embed.weight",
    "lm_head.weight": "head.weight",
    "model.norm.weight": "norm.weight",
    "model.hc_head.hc_fn": "hc_head_fn",
    "model.hc_head.hc_base": "hc_head_base",
    "model.hc_head.hc_scale": "hc_head_scale",
}
_HF_LAYER_QUIRKS = {"attn.norm.weight": "attn.kv_norm.weight"}

_TOP_LEVEL = {
    "embed.weight": "token_embd.weight",
    "head.weight": "output.weight",
    "norm.weight": "output_norm.weight",
    "hc_head_fn": "output_hc_fn.weight",
    "hc_head_base": "output_hc_base.weight",
    "hc_head_scale": "output_hc_scale.weight",
}

# Per-block suffixes, hub -> GGUF (shared by main layers and the MTP block).
_BLOCK = {
    "attn_norm.weight": "attn_norm.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "attn.wq_a.weight": "attn_q_a.weight",
    "attn.q_norm.weight": "attn_q_a_norm.weight",
    "attn.wq_b.weight": "attn_q_b.weight",
    "attn.wkv.weight": "attn_kv.weight",
    "attn.kv_norm.weight": "attn_kv_a_norm.weight",
    "attn.wo_a.weight": "attn_output_a.weight",
    "attn.wo_b.weight": "attn_output_b.weight",
    "attn.attn_sink": "attn_sinks.weight",
    "attn.compressor.ape": "attn_compressor_ape.weight",
    "attn.compressor.wkv.weight": "attn_compressor_kv.weight",
    "attn.compressor.wgate.weight": "attn_compressor_gate.weight",
    "attn.compressor.norm.weight": "attn_compressor_norm.weight",
    "attn.indexer.wq_b.weight": "indexer.attn_q_b.weight",
    "attn.indexer.weights_proj.weight": "indexer.proj.weight",
    "attn.indexer.compressor.ape": "indexer_compressor_ape.weight",
    "attn.indexer.compressor.wkv.weight": "indexer_compressor_kv.weight",
    "attn.indexer.compressor.wgate.weight": "indexer_compressor_gate.weight",
    "attn.indexer.compressor.norm.weight": "indexer_compressor_norm.weight",
    "ffn.gate.weight": "ffn_gate_inp.weight",
    "ffn.gate.bias": "exp_probs_b.bias",
    "ffn.gate.tid2eid": "ffn_gate_tid2eid.weight",
    "ffn.shared_experts.w1.weight": "ffn_gate_shexp.weight",
    "ffn.shared_experts.w3.weight": "ffn_up_shexp.weight",
    "ffn.shared_experts.w2.weight": "ffn_down_shexp.weight",
    **{f"hc_{site}_{part}": f"hc_{site}_{part}.weight"
       for site in ("attn", "ffn") for part in ("fn", "base", "scale")},
}  # fmt: skip
# Only in the MTP block (assumed to follow the release's `mtp.N.` spelling).
_MTP_ONLY = {
    "e_proj.weight": "e_proj.weight",
    "h_proj.weight": "h_proj.weight",
    "enorm.weight": "enorm.weight",
    "hnorm.weight": "hnorm.weight",
    "norm.weight": "norm.weight",
    "hc_head_fn": "hc_head_fn.weight",
    "hc_head_base": "hc_head_base.weight",
    "hc_head_scale": "hc_head_scale.weight",
}
EXPERT_WEIGHTS = {"w1": "ffn_gate_exps.weight", "w3": "ffn_up_exps.weight",
                  "w2": "ffn_down_exps.weight"}  # fmt: skip

_BLOCK_NAME = re.compile(r"^(layers|mtp)\.(\d+)\.(.+)$")
_EXPERT = re.compile(r"^ffn\.experts\.(\d+)\.(w[123])\.weight$")
IGNORED_SUFFIXES = (".scale",)  # FP8/FP4 block scales travel with their weight


def hub_name(name: str) -> str:
    """The release's spelling of a checkpoint tensor name (hub or save_pretrained input)."""
    if name in _HF_TOP_LEVEL:
        return _HF_TOP_LEVEL[name]
    if name.startswith("model.layers."):
        name = name[len("model.") :]
        match = _BLOCK_NAME.match(name)
        if match and match.group(3) in _HF_LAYER_QUIRKS:
            return f"layers.{match.group(2)}.{_HF_LAYER_QUIRKS[match.group(3)]}"
    return name


@dataclass(frozen=True)
class GGUFTarget:
    """Where a hub tensor goes: a GGUF tensor, and the expert slot for routed experts."""

    gguf_name: str
    expert: int | None = None
    is_mtp: bool = False


def gguf_target(hub: str) -> GGUFTarget | None:
    """Map a hub name to its GGUF tensor; None for names that are not weights we convert."""
    if hub in _TOP_LEVEL:
        return GGUFTarget(_TOP_LEVEL[hub])
    match = _BLOCK_NAME.match(hub)
    if match is None:
        return None
    kind, index, suffix = match.groups()
    prefix = f"blk.{index}." if kind == "layers" else f"mtp.{index}."
    mtp = kind == "mtp"
    expert = _EXPERT.match(suffix)
    if expert is not None:
        return GGUFTarget(prefix + EXPERT_WEIGHTS[expert.group(2)], int(expert.group(1)), mtp)
    table = {**_BLOCK, **_MTP_ONLY} if mtp else _BLOCK
    if suffix in table:
        return GGUFTarget(prefix + table[suffix], None, mtp)
    return None


def scale_name(weight_name: str) -> str:
    """The sibling holding an FP8/FP4 weight's block scales (`X.weight` -> `X.scale`)."""
    return weight_name.removesuffix(".weight") + ".scale"


# --- checkpoint sources ---
# Which stored checkpoint tensors feed each GGUF tensor, and how they are read in chunks.
#
# `index_sources` checks the whole checkpoint up front (unknown names, missing FP8/FP4
# scales, duplicate experts) so a conversion fails before writing anything; `chunks`
# then reads one expert or one band of rows at a time through the Checkpoint port.

ROW_BAND = 8192  # rows decoded at once for big 2-D tensors (a multiple of the FP8 tile)

# importance(gguf_name, source_name, expert or None, n_experts, n_columns) -> per-column weights
ImportanceLookup = Callable[[str, str, int | None, int, int], npt.NDArray[np.float32] | None]


@dataclass
class GGUFSource:
    """The stored tensors of one GGUF tensor: one, or one per routed expert."""

    stored: str | None = None
    experts: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceIndex:
    sources: dict[str, GGUFSource]  # by GGUF name
    naming: str  # "hf" (save_pretrained) or "official"

    def has(self, gguf_name: str) -> bool:
        return gguf_name in self.sources

    def has_mtp(self) -> bool:
        return any(name.startswith("mtp.") for name in self.sources)


class ConversionError(Ds4Error):
    """The checkpoint cannot be converted as it stands; the message names the tensors."""


def _listing(names: list[str]) -> str:
    shown = ", ".join(sorted(names)[:6])
    return shown + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def index_sources(tensors: Mapping[str, CheckpointTensor]) -> SourceIndex:
    sources: dict[str, GGUFSource] = {}
    unknown: list[str] = []
    for stored, info in tensors.items():
        hub = hub_name(stored)
        target = gguf_target(hub)
        if target is None:
            if not stored.endswith(IGNORED_SUFFIXES):
                unknown.append(stored)
            continue
        if info.dtype in SCALED_DTYPES and scale_name(stored) not in tensors:
            raise ConversionError(f"{stored}: {info.dtype} weight has no {scale_name(stored)}")
        entry = sources.setdefault(target.gguf_name, GGUFSource())
        if target.expert is None:
            entry.stored = stored
        elif target.expert in entry.experts:
            raise ConversionError(f"{stored}: expert {target.expert} appears twice")
        else:
            entry.experts[target.expert] = stored
    if unknown:
        raise ConversionError(f"unrecognized checkpoint tensors: {_listing(unknown)}")
    naming = "hf" if any(n.startswith("model.") for n in tensors) else "official"
    return SourceIndex(sources, naming)


def check_complete(index: SourceIndex, plans: list[PlannedTensor], n_expert: int) -> None:
    """Every planned tensor has its sources, with all experts; say everything missing."""
    missing = []
    for plan in plans:
        source = index.sources.get(plan.name)
        if source is None:
            missing.append(plan.name)
        elif source.stored is None and sorted(source.experts) != list(range(n_expert)):
            have = len(source.experts)
            missing.append(f"{plan.name} (has {have} of {n_expert} experts)")
    if missing:
        raise ConversionError(f"checkpoint lacks tensors for: {_listing(missing)}")


def _read(
    ckpt: Checkpoint, stored: str, rows: slice
) -> npt.NDArray[np.float32] | npt.NDArray[np.int32]:
    info = ckpt.tensors[stored]
    scale = ckpt.raw(scale_name(stored)) if info.dtype in SCALED_DTYPES else None
    return decode_rows(stored, ckpt.raw(stored), info.dtype, scale, rows)


def _as_mxfp4(ckpt: Checkpoint, stored: str) -> npt.NDArray[np.uint8] | None:
    """An FP4 expert's MXFP4 blocks, repacked without rounding; None for other dtypes
    (which the quantizer encodes from their values)."""
    if ckpt.tensors[stored].dtype != "I8":
        return None
    codes = np.ascontiguousarray(ckpt.raw(stored)).view(np.uint8)
    return fp4_as_mxfp4(codes, np.asarray(ckpt.raw(scale_name(stored))).view(np.uint8), stored)


def _value_shape(ckpt: Checkpoint, stored: str) -> tuple[int, ...]:
    info = ckpt.tensors[stored]
    return logical_shape(info.shape, info.dtype)


def chunks(
    ckpt: Checkpoint, index: SourceIndex, plan: PlannedTensor, importance: ImportanceLookup
) -> Iterator[Chunk]:
    """The planned tensor's values, one expert or one band of rows at a time."""
    source = index.sources[plan.name]
    shape = plan.numpy_shape
    if source.stored is None:  # routed experts, stacked on the leading axis
        for expert in range(shape[0]):
            stored = source.experts[expert]
            if _value_shape(ckpt, stored) != shape[1:]:
                raise ConversionError(
                    f"{stored}: shape {_value_shape(ckpt, stored)}, expected {shape[1:]}"
                )
            values = _read(ckpt, stored, slice(None))[None]
            encoded = _as_mxfp4(ckpt, stored) if plan.ggml_type is GGMLType.MXFP4 else None
            weights = importance(plan.name, stored, expert, shape[0], shape[-1])
            yield Chunk(values, weights, None if encoded is None else encoded[None])
        return
    stored = source.stored
    got = _value_shape(ckpt, stored)
    if got != shape:
        raise ConversionError(f"{stored}: shape {got}, expected {shape} for {plan.name}")
    weights = importance(plan.name, stored, None, 1, shape[-1]) if len(shape) > 1 else None
    if len(shape) == 1:
        yield Chunk(_read(ckpt, stored, slice(None)))
        return
    for start in range(0, shape[0], ROW_BAND):
        yield Chunk(_read(ckpt, stored, slice(start, start + ROW_BAND)), weights)
