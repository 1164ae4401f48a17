"""A complete, valid DeepSeek V4 GGUF of a few MB, for tests that break one thing in it.

The tiny-2layer shape (one dense, one ratio-4 layer) over the small hand-made BPE
vocabulary of the tokenizer unit tests, every tensor of the catalog present with
zero data (routed experts Q2_K so the CPU backend can run it). `write_micro_model`
takes metadata and tensor-byte overrides, so a test can write exactly the bad file
it needs and compare what `ds4 gguf inspect` and the engine loaders say about it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ds4.adapters.gguf.writer import GGUFWriter
from ds4.adapters.tokenizer.vocabulary import tokenizer_metadata
from ds4.domain.gguf.ggml_types import GGMLType, tensor_nbytes
from ds4.domain.gguf.records import MetaValue
from ds4.domain.model.catalog import TensorSpec, model_tensors
from ds4.domain.model.hparams import DeepSeekV4HParams, hparams_metadata
from ds4.domain.model.presets import TINY_SHAPES
from tests.unit.tokenizer.tiny_bpe_vocab import tiny_vocabulary

VOCAB = tiny_vocabulary()
MICRO: DeepSeekV4HParams = dataclasses.replace(
    TINY_SHAPES["tiny-2layer"], n_vocab=len(VOCAB.tokens)
)


def micro_metadata() -> dict[str, MetaValue]:
    return {**hparams_metadata(MICRO), **tokenizer_metadata(VOCAB)}


def _tensor_type(spec: TensorSpec) -> GGMLType:
    # Q2_K where its 256-value blocks fit the rows (the projections may take it too now,
    # but some of the micro shape's rows are 64 wide).
    q2_fits = spec.dims[0] % 256 == 0
    for choice in (GGMLType.I32, GGMLType.Q2_K, GGMLType.F32):
        if choice in spec.allowed and (choice is not GGMLType.Q2_K or q2_fits):
            return choice
    raise AssertionError(f"{spec.name}: no test type among {spec.allowed}")


def micro_tensors() -> dict[str, tuple[tuple[int, ...], GGMLType]]:
    """name -> (GGUF dims, type) of every catalog tensor, optional ones included."""
    return {spec.name: (spec.dims, _tensor_type(spec)) for spec in model_tensors(MICRO)}


def write_micro_model(
    path: Path,
    *,
    metadata: Mapping[str, MetaValue | None] | None = None,
    data: Mapping[str, bytes] | None = None,
) -> Path:
    """The micro model with `metadata` entries replaced (None: removed) and some
    tensors' bytes replaced by `data` (same size as the zeros they replace)."""
    meta: dict[str, MetaValue | None] = {**micro_metadata(), **(metadata or {})}
    writer = GGUFWriter(path)
    for key, value in meta.items():
        if value is not None:
            writer.add_metadata(key, value)
    tensors = micro_tensors()
    for name, (dims, ggml_type) in tensors.items():
        writer.add_tensor(name, dims, ggml_type)
    with writer:
        for name, (dims, ggml_type) in tensors.items():
            size = tensor_nbytes(ggml_type, int(np.prod(dims)))
            raw = (data or {}).get(name, bytes(size))
            assert len(raw) == size, f"{name}: {len(raw)} bytes, the tensor has {size}"
            writer.write_tensor(name, raw)
        writer.finish()
    return path
