"""Layer-shard files: one GGUF per layer range of a model, so a `--distributed` worker
maps only its range (docs/distributed.md#layer-shard-files).

`ds4 gguf split --layers 0-30,31-output` writes them; the loader validates them; the
distributed backend opens each range's file. Pure: the `--layers` syntax, which tensors
belong to which shard, the `ds4.split.*` metadata keys and their range checks, and the
rule that a set of shards covers a model once.

A shard carries the full model's metadata (hyperparameters, tokenizer) unchanged, plus:

- `ds4.split.first_layer`, `ds4.split.last_layer` (u32, inclusive): the layers it holds;
- `ds4.split.embedding`, `ds4.split.head` (bool): whether it holds the token embedding
  (the shard starting at layer 0) and the output head (the `output` shard);
- `ds4.split.model_tag` (u32): the unsplit model's identity (kv_file.model_tag_for), so
  every shard of one model, and the coordinator, agree on which model they run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.records import MetaValue, ValueType

FIRST_KEY = "ds4.split.first_layer"
LAST_KEY = "ds4.split.last_layer"
EMBEDDING_KEY = "ds4.split.embedding"
HEAD_KEY = "ds4.split.head"
TAG_KEY = "ds4.split.model_tag"
SPLIT_KEYS = (FIRST_KEY, LAST_KEY, EMBEDDING_KEY, HEAD_KEY, TAG_KEY)

EMBEDDING_TENSORS = ("token_embd.weight",)
HEAD_TENSORS = (
    "output_hc_fn.weight",
    "output_hc_scale.weight",
    "output_hc_base.weight",
    "output_norm.weight",
    "output.weight",
)
MAX_LAYERS = 1 << 16  # far above any DeepSeek V4 (43 Flash, 61 PRO): a larger value is garbage

_LAYER = re.compile(r"blk\.(\d+)\.")
_PART = re.compile(r"(\d+)-(\d+|output)")


@dataclass(frozen=True)
class Shard:
    """The part of a model one shard file holds: layers (a Python range, stop
    exclusive), whether it has the embedding and the head, and the unsplit model's tag."""

    layers: range
    embedding: bool
    head: bool
    model_tag: int

    def label(self) -> str:
        last = "output" if self.head else str(self.layers.stop - 1)
        return f"{self.layers.start}-{last}"

    def holds(self, name: str) -> bool:
        """Whether tensor `name` belongs in this shard."""
        if name in EMBEDDING_TENSORS:
            return self.embedding
        if name in HEAD_TENSORS:
            return self.head
        m = _LAYER.match(name)
        return m is not None and int(m.group(1)) in self.layers

    def metadata(self) -> dict[str, MetaValue]:
        return {
            FIRST_KEY: MetaValue(ValueType.UINT32, self.layers.start),
            LAST_KEY: MetaValue(ValueType.UINT32, self.layers.stop - 1),
            EMBEDDING_KEY: MetaValue(ValueType.BOOL, self.embedding),
            HEAD_KEY: MetaValue(ValueType.BOOL, self.head),
            TAG_KEY: MetaValue(ValueType.UINT32, self.model_tag),
        }


def shard_file_name(prefix: str, shard: Shard) -> str:
    """PREFIX-layers00-30.gguf, PREFIX-layers31-output.gguf: the ranges spelled as in the
    published PRO Q4 halves' names (docs/pull.md)."""
    last = "output" if shard.head else f"{shard.layers.stop - 1:02d}"
    return f"{prefix}-layers{shard.layers.start:02d}-{last}.gguf"


def parse_shard_layers(text: str, n_layer: int) -> list[range]:
    """`--layers A-B,C-output`: inclusive ranges in order, covering layers 0..n_layer-1
    once each; `output` is the last layer (the head goes with it). Ds4Error naming the
    first problem."""
    if not 1 <= n_layer <= MAX_LAYERS:
        raise Ds4Error(f"a model of {n_layer} layers cannot be split")
    ranges: list[range] = []
    parts = text.split(",")
    for i, part in enumerate(parts):
        m = _PART.fullmatch(part.strip())
        if m is None:
            raise Ds4Error(f"--layers {part!r}: expected A-B or A-output (e.g. 0-30,31-output)")
        first = int(m.group(1))
        if m.group(2) == "output":
            if i != len(parts) - 1:
                raise Ds4Error(f"--layers {part!r}: only the last range can end at output")
            last = n_layer - 1
        else:
            last = int(m.group(2))
        if last < first:
            raise Ds4Error(f"--layers {part!r}: the last layer precedes the first")
        expected = ranges[-1].stop if ranges else 0
        if first != expected:
            what = "overlaps the range before" if first < expected else f"skips layer {expected}"
            raise Ds4Error(f"--layers {part!r} {what}; cover 0-output once, in order")
        if last >= n_layer:
            raise Ds4Error(f"--layers {part!r}: the model has layers 0-{n_layer - 1}")
        ranges.append(range(first, last + 1))
    if ranges[-1].stop != n_layer:
        raise Ds4Error(
            f"--layers stops at layer {ranges[-1].stop - 1}; end the last range at output "
            f"(layer {n_layer - 1} and the head)"
        )
    return ranges


def shards_for(ranges: Sequence[range], n_layer: int, model_tag: int) -> list[Shard]:
    """The shards of a split: the first holds the embedding, the last the head."""
    return [
        Shard(r, embedding=r.start == 0, head=r.stop == n_layer, model_tag=model_tag)
        for r in ranges
    ]


def shard_as_model_error(path: str) -> str:
    return (
        f"{path} is a layer-shard file (part of a model, from `ds4 gguf split`): run the "
        "shards together with --distributed ... --layer-files FILE,FILE"
    )


def _uint(meta: MetaValue | None, key: str, top: int) -> int:
    if meta is None:
        raise Ds4Error(f"{key}: missing")
    value = meta.value
    if meta.vtype not in (ValueType.UINT32, ValueType.UINT64) or not isinstance(value, int):
        raise Ds4Error(f"{key}: expected an unsigned integer")
    if not 0 <= value <= top:
        raise Ds4Error(f"{key}: {value} is outside 0..{top}")
    return value


def _flag(meta: MetaValue | None, key: str) -> bool:
    if meta is None or meta.vtype != ValueType.BOOL or not isinstance(meta.value, bool):
        raise Ds4Error(f"{key}: expected a bool")
    return meta.value


def is_shard(metadata: Mapping[str, MetaValue]) -> bool:
    return any(key in metadata for key in SPLIT_KEYS)


def read_shard(metadata: Mapping[str, MetaValue], n_layer: int) -> Shard | None:
    """The shard a file's metadata declares (None: a whole model). Ds4Error naming the
    key when a value is missing, mistyped or out of range."""
    if not is_shard(metadata):
        return None
    first = _uint(metadata.get(FIRST_KEY), FIRST_KEY, max(n_layer - 1, 0))
    last = _uint(metadata.get(LAST_KEY), LAST_KEY, max(n_layer - 1, 0))
    if last < first:
        raise Ds4Error(f"{LAST_KEY}: {last} precedes {FIRST_KEY} {first}")
    embedding = _flag(metadata.get(EMBEDDING_KEY), EMBEDDING_KEY)
    head = _flag(metadata.get(HEAD_KEY), HEAD_KEY)
    if embedding != (first == 0):
        raise Ds4Error(f"{EMBEDDING_KEY}: the embedding goes with layer 0 (this shard: {first}-)")
    if head != (last == n_layer - 1):
        raise Ds4Error(f"{HEAD_KEY}: the head goes with the last layer, {n_layer - 1}")
    tag = _uint(metadata.get(TAG_KEY), TAG_KEY, (1 << 32) - 1)
    return Shard(range(first, last + 1), embedding, head, tag)


def infer_shard(names: Iterable[str], n_layer: int) -> Shard | None:
    """The part a file without ds4.split.* keys holds, judged by its tensors: one
    contiguous layer range short of the whole model, the embedding exactly when it
    starts at layer 0 and the head exactly when it ends at the last layer (the layout
    of the published PRO Q4 halves, docs/pull.md); None for anything else. Its
    model_tag is 0: unknown, the shards are then matched by their metadata."""
    held = set(names)
    embedding, head = "token_embd.weight" in held, "output.weight" in held
    if embedding and head:
        return None
    layers = sorted({int(m.group(1)) for n in held if (m := _LAYER.match(n)) is not None})
    if not layers or layers != list(range(layers[0], layers[-1] + 1)):
        return None
    part = range(layers[0], layers[-1] + 1)
    if part.stop > n_layer or embedding != (part.start == 0) or head != (part.stop == n_layer):
        return None
    return Shard(part, embedding, head, model_tag=0)


def part_of(metadata: Mapping[str, MetaValue], names: Iterable[str], n_layer: int) -> Shard | None:
    """The shard a file is (its ds4.split.* keys, else its tensors), None: a whole model.
    Ds4Error when its keys are wrong."""
    declared = read_shard(metadata, n_layer)
    return declared if declared is not None else infer_shard(names, n_layer)


def stray_tensors(shard: Shard, names: Iterable[str]) -> list[str]:
    """Tensors of a shard file that belong to another part of the model."""
    return [n for n in names if not shard.holds(n) and _belongs_somewhere(n)]


def _belongs_somewhere(name: str) -> bool:
    return name in EMBEDDING_TENSORS or name in HEAD_TENSORS or _LAYER.match(name) is not None


def check_shard_set(shards: Sequence[tuple[str, Shard]], n_layer: int) -> None:
    """Ds4Error unless the (path, shard) list covers layers 0..n_layer-1 once, in order,
    and every shard is of the same model."""
    if not shards:
        raise Ds4Error("--layer-files needs at least one file")
    tag = shards[0][1].model_tag
    expected = 0
    for path, shard in shards:
        if shard.model_tag != tag:
            raise Ds4Error(f"{path} is a shard of another model than {shards[0][0]}")
        if shard.layers.start != expected:
            what = (
                "overlaps the file before"
                if shard.layers.start < expected
                else (f"leaves layer {expected} to no file")
            )
            raise Ds4Error(f"{path} (layers {shard.label()}) {what}; give the files in order")
        expected = shard.layers.stop
    if expected != n_layer:
        raise Ds4Error(
            f"--layer-files stop at layer {expected - 1}; the model has layers 0-{n_layer - 1}"
        )
