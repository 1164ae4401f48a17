"""The model identity behind the KVC header's model tag (ADR 0006).

Checkpoints are only valid for the weights that wrote them. The identity hashes what
distinguishes one model file from another without reading its weights: every
metadata entry except the tokenizer tables (shapes, hyperparameters, converter
provenance such as the seed of a random tiny model), and each tensor's name, shape
and type. Two quantizations of one model differ (tensor types), as they should:
their KV states are not interchangeable bit for bit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from ds4.domain.gguf.records import MetaValue, TensorInfo
from ds4.domain.kvcache.kvc_header import model_tag
from ds4.domain.model.hparams import DeepSeekV4HParams

_SKIPPED_PREFIX = "tokenizer."


def model_identity(
    hparams: DeepSeekV4HParams,
    metadata: Mapping[str, MetaValue] | None = None,
    tensors: Iterable[TensorInfo] = (),
) -> bytes:
    digest = hashlib.sha1(repr(hparams).encode())
    for key in sorted(metadata or {}):
        if not key.startswith(_SKIPPED_PREFIX):
            digest.update(f"\n{key}={(metadata or {})[key].value!r}".encode())
    for info in sorted(tensors, key=lambda t: t.name):
        digest.update(f"\n{info.name}:{info.dims}:{info.ggml_type.name}".encode())
    return digest.digest()


def model_tag_for(
    hparams: DeepSeekV4HParams,
    metadata: Mapping[str, MetaValue] | None = None,
    tensors: Iterable[TensorInfo] = (),
) -> int:
    """The nonzero 32-bit tag stored in the header for this model."""
    return model_tag(model_identity(hparams, metadata, tensors))
