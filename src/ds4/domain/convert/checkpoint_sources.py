"""Which stored checkpoint tensors feed each GGUF tensor, and how they are read in chunks.

`index_sources` checks the whole checkpoint up front (unknown names, missing FP8/FP4
scales, duplicate experts) so a conversion fails before writing anything; `chunks`
then reads one expert or one band of rows at a time through the Checkpoint port.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ds4.domain.convert.planned import Chunk, PlannedTensor
from ds4.domain.convert.source_decode import SCALED_DTYPES, decode_rows, logical_shape
from ds4.domain.convert.tensor_names import IGNORED_SUFFIXES, gguf_target, hub_name, scale_name
from ds4.domain.errors import Ds4Error
from ds4.ports.checkpoint import Checkpoint, CheckpointTensor

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
            yield Chunk(values, importance(plan.name, stored, expert, shape[0], shape[-1]))
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
