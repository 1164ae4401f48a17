"""Layer-shard files opened together (docs/distributed.md#layer-shard-files).

`ShardSet` is the ModelFile port over the shard files of one model (`ds4 gguf split`):
the union of their tensor directories, each tensor's bytes from the file holding it,
and the metadata of the unsplit model (the shards' own `ds4.split.*` keys left out), so
the model tag, the tokenizer and the coordinator's embedding and output head read it as
they read the whole file. Each file stays mapped on its own; only the pages of the
tensors used are ever read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from ds4.adapters.gguf.model_files import load_model
from ds4.adapters.gguf.reader import GGUFFile
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.records import MetaValue, TensorInfo
from ds4.domain.kvcache.kv_file import model_tag_for
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.model.shards import SPLIT_KEYS, Shard, check_shard_set, is_shard, part_of
from ds4.ports.model_file import ModelFile


class ShardSet:
    def __init__(self, files: Sequence[GGUFFile], shards: Sequence[Shard]) -> None:
        self._files = list(files)
        self.shards = list(shards)
        first = self._files[0]
        self._metadata = {k: v for k, v in first.metadata.items() if k not in SPLIT_KEYS}
        self._owner: dict[str, GGUFFile] = {}
        self._tensors: dict[str, TensorInfo] = {}
        for f in self._files:
            for name, info in f.tensors.items():
                self._owner[name] = f
                self._tensors[name] = info

    @property
    def path(self) -> str:
        return self._files[0].path

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self._files]

    @property
    def version(self) -> int:
        return self._files[0].version

    @property
    def alignment(self) -> int:
        return self._files[0].alignment

    @property
    def file_size(self) -> int:
        return sum(f.file_size for f in self._files)

    @property
    def metadata(self) -> Mapping[str, MetaValue]:
        return self._metadata

    @property
    def tensors(self) -> Mapping[str, TensorInfo]:
        return self._tensors

    def raw(self, name: str) -> npt.NDArray[np.uint8]:
        owner = self._owner.get(name)
        if owner is None:
            raise KeyError(name)
        return owner.raw(name)

    @property
    def model_tag(self) -> int:
        """The model the shards are of (the one every worker checks)."""
        return self.shards[0].model_tag

    def whole_tag(self, hp: DeepSeekV4HParams) -> int:
        """The tag of the shards together, as of the unsplit file."""
        return model_tag_for(hp, self.metadata, self.tensors.values())

    def close(self) -> None:
        for f in self._files:
            f.close()


def load_shard_set(paths: Sequence[str]) -> tuple[ShardSet, DeepSeekV4HParams]:
    """The shard files of one model, each validated as a shard, in layer order and
    covering the model once; Ds4Error naming the file and the problem."""
    if not paths:
        raise Ds4Error("--layer-files needs at least one file")
    opened: list[GGUFFile] = []
    try:
        found: list[tuple[str, Shard]] = []
        hp: DeepSeekV4HParams | None = None
        for path in paths:
            model, this = load_model(path, shard_ok=True)
            opened.append(model)
            shard = part_of(model.metadata, model.tensors, this.n_layer)
            if shard is None:
                raise Ds4Error(
                    f"{path} is a whole model, not a layer shard: pass it as -m, or split "
                    "it with `ds4 gguf split`"
                )
            if hp is not None and this != hp:
                raise Ds4Error(f"{path}: its hyperparameters differ from {paths[0]}'s")
            hp = this
            if shard.model_tag == 0:  # no ds4.split.* keys: the metadata says which model
                shard = replace(shard, model_tag=metadata_tag(model, this))
            found.append((path, shard))
        assert hp is not None
        check_shard_set(found, hp.n_layer)
    except Exception:
        for f in opened:
            f.close()
        raise
    shard_set = ShardSet(opened, [s for _, s in found])
    declared = is_shard(opened[0].metadata)
    if declared and shard_set.whole_tag(hp) != shard_set.model_tag:
        shard_set.close()
        raise Ds4Error(
            f"{paths[0]}: the shards together are not the model they were split from "
            "(its ds4.split.model_tag differs)"
        )
    return shard_set, hp


def metadata_tag(model: ModelFile, hp: DeepSeekV4HParams) -> int:
    """The identity of a shard without ds4.split.* keys: its hyperparameters and
    metadata (every shard of one model carries the same)."""
    return model_tag_for(hp, {k: v for k, v in model.metadata.items() if k not in SPLIT_KEYS})


def file_model_tag(model: ModelFile, hp: DeepSeekV4HParams) -> int:
    """The tag of the model a file is, or is a shard of (what a worker checks against
    the coordinator's StageSpec.model_tag)."""
    shard = part_of(model.metadata, model.tensors, hp.n_layer)
    if shard is None:
        return model_tag_for(hp, model.metadata, model.tensors.values())
    return shard.model_tag if shard.model_tag != 0 else metadata_tag(model, hp)
