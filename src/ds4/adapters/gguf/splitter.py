"""Write the layer-shard files of a model (`ds4 gguf split`, domain/model/shards.py).

Each shard is a GGUF with the model's metadata as it is, the shard's `ds4.split.*`
keys, and the tensors of its part copied byte for byte (no re-quantization), in the
source's order and alignment. A file appears under its name only once complete
(GGUFWriter writes a temporary file and renames it), so an interrupted split leaves no
half shard that a worker could open.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ds4.adapters.gguf.reader import DEFAULT_ALIGNMENT
from ds4.adapters.gguf.writer import GGUFWriter
from ds4.domain.model.shards import SPLIT_KEYS, Shard
from ds4.ports.model_file import ModelFile

COPY_CHUNK = 64 << 20  # bytes per write: bounded memory whatever the tensor's size

Progress = Callable[[int], None]  # bytes copied since the last call


def write_shard(model: ModelFile, shard: Shard, path: Path, progress: Progress) -> Path:
    """One shard of `model` at `path`, atomically."""
    with GGUFWriter(path, alignment=model.alignment) as out:
        for key, value in model.metadata.items():
            if key in SPLIT_KEYS:
                continue
            if key == "general.alignment" and model.alignment != DEFAULT_ALIGNMENT:
                continue  # the writer records its own alignment
            out.add_metadata(key, value)
        for key, value in shard.metadata().items():
            out.add_metadata(key, value)
        names = [name for name in model.tensors if shard.holds(name)]
        for name in names:
            info = model.tensors[name]
            out.add_tensor(name, info.dims, info.ggml_type)
        for name in names:
            out.write_tensor_parts(name, _chunks(model, name, progress))
        return out.finish()


def _chunks(model: ModelFile, name: str, progress: Progress) -> Iterator[bytes]:
    flat = model.raw(name).reshape(-1)
    for start in range(0, flat.size, COPY_CHUNK):
        part = flat[start : start + COPY_CHUNK]
        yield part.tobytes()
        progress(part.size)
